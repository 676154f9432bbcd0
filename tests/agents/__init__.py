"""Agent modules that tests serve from a separate `python worker.py --agent tests.agents.<mod>:agent` process."""
