"""Reading user input files: regular files only, under a size cap, strictly decoded."""
