"""The core: pure data and rules (IR, config, session, result, machine, contract, ...); no I/O."""
