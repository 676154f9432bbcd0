"""The in-process runner: rein.core.machine driven without Temporal."""
