from skillvc.cli import main

main()
