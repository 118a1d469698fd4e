"""Reading runs back: evaluations, reports, charts, history, runs, trust, doctor, output."""
