"""skillvc in words: the glossary (`skillvc help terms`, docs/glossary.md), the CLI reference."""
