"""The Temporal runner: the engine behind Agent.run, create_worker, the embedded server, fleet control.

Also on this floor, at their public paths: rein.client, rein.temporal/, rein.tracing/, and the
top-level workflows/ and activities/ (installed as rein.workflows / rein.activities)."""
