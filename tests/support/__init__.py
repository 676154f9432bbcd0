"""Helpers shared by the test modules, each defined once (fixtures `env` and `dev` are in conftest).

- history: every payload of a run's history decoded through the converter (external storage,
  codec, payload converter); `assert_secret_absent` for every secret check; summaries and
  event filters.
- waiting: `poll` / `wait_until` with a bound and a message, `wait_status` on the status query.
- providers: scripted models (RecordingProvider, EchoProvider, OutageProvider, CallThenReport,
  OpsModel, the StreamsItsCompletion mixin) and the vendor errors they raise.
- tools: `tc` (a tool call as a model asks for it) and plain tools (add, mul, explode).
- results: what a run's result says (tool_messages, engine_view).
- runs: starting a run by the raw contract.
- processes: `worker.py` workers, ports, logs and stopping processes.
"""
