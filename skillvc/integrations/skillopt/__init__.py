"""From SkillOpt to skillvc: its YAML configs translated (``config``), its run directories
imported as history (``runs``, ``importer``)."""
