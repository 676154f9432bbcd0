"""Operator tools and apps over durable runs: fork, rewind, runs, replay, stuck runs, A2A, `rein new`."""
