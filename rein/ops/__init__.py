"""Operator tools and apps over durable runs: runs, replay, stuck runs, routing, A2A, `rein new`.

Fork, rewind and what-ifs are rein.durable's (ReinClient calls them; rein.ops.fork and friends are old paths)."""
