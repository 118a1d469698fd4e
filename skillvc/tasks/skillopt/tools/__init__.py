"""Tool modules for SkillOpt's environments, named in ``[tools] python`` by module name."""
