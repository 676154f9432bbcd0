"""The Temporal runner: the engine behind Agent.run, create_worker, the embedded server, fleet control, and what
ReinClient's methods call beneath it (decisions, inbox, rules, schedules, threads, fork, rewind, what-ifs).

Also on this floor, at their public paths: rein.client, rein.temporal/, rein.tracing/, and the
top-level workflows/ and activities/ (installed as rein.workflows / rein.activities)."""
