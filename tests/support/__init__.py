"""Helpers shared by the test modules, each defined once.

- history: every payload of a run's history decoded (codec, external storage, converter),
  secret checks on that, and event filters.
- waiting: polling with a bound, and waiting for a run's `status` query.
- providers: scripted models and the vendor errors they raise.
- tools: plain tools and tool-call builders the scripts use.
- processes: `worker.py` workers, dev servers and their logs, as real processes.
"""
