"""The LLM judge measured against a person: calibration, the trust gate, rubric training."""
