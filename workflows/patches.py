"""The patch-id table: every `workflow.patched` id AgentWorkflow asks or retired, in one place.

Patch ids are permanent data: runs in flight and stored histories carry them (tests/test_patch_ids.py
keeps each constant's id as the landed builds defined it). Changing what a patch guards is a NEW
constant with a new id. A patch is asked where the builds that recorded it asked it, and only for runs
those builds could have started (rein.workflows.window reads which build started a run from its history:
never `workflow.unsafe.is_replaying()`); `patched` records a marker when not replaying, so a retired
patch is never asked on a new run's path. A patch is retired (its code deleted, its id kept here) only
when the last build that recorded it leaves the support window (docs/deploys.md, "Support window").
"""

PATCH_FAMILY_USAGE = "rein-family-usage"
"""Since this patch a parent's usage (tokens, cost, breakers, ReinTokens, ReinCostUsd) includes its
child agents' usage. Asked when a child run first reports or ends, so runs without agent tools
record no marker."""

PATCH_THROTTLED_COUNTERS = "rein-throttled-counters"

PATCH_PROMPT_CANCEL = "rein-prompt-cancel"

PATCH_NATIVE_CANCEL = "rein-native-cancel"
"""Retired for good: only builds before the support window (before f732bd2) recorded these three, and
their runs fail with the window's one line (rein.workflows.window). Since rein-native-cancel, Temporal
cancellation of the workflow ends the run like the `cancel` signal."""

PATCH_FAILED_STATUS = "rein-failed-status"
"""Since this patch, a run that fails before it knows its agent still learns the search attributes to
publish ReinStatus=failed (one extra local activity on that path only)."""

PATCH_TIMED_COUNTERS = "rein-timed-counters"
"""Asked only by runs of f732bd2, where its counter rule asked it (rein.workflows.window); every
other run refreshes counters by workflow time. Retired when f732bd2 leaves the window (2026-12-31)."""

PATCH_DESCRIBED_FIRST = "rein-described-first"
"""A new run that learned its agent before its first model call, as builds 19a14b7 to 81ba243 recorded it:
asked only for runs whose first task one of them completed (rein.workflows.window). This build starts
every new conversation lean and records it for none."""

PATCH_WAITING_TIMER = "rein-waiting-timer"
"""Since this patch every wait for a person shows on that timer (asked at a run's first wait: runs that
never wait record no marker). Runs that waited before it replay without the timer; a run described
with the retired opt-in flag (REIN_UI_WAIT_TIMER=1) waits on its old build (docs/deploys.md)."""

PATCH_THREAD_MEMO = "rein-thread-memo"
"""Since this patch a thread started without the `rein.thread` memo (by a stock tool, not a rein client) upserts
it at its first turn, so `rein threads`, `rein watch` and `rein result` know it for a thread. Threads started
by rein's clients carry the memo and record nothing."""

PATCH_CLIENT_TOOLS = "rein-client-tools"
"""Since this patch a thread's message may bring client tools (SendRequest.tools, rein.ops.agui): its turn offers them
to the model beside the agent's own and waits (`need_input`) for the client's result of each call (`rein.tool_results`).
Asked when such a message opens or joins a turn: turns without client tools record no marker."""

PATCH_INBOX = "rein-inbox"
"""Since this patch a run about to wait for approval asks the rules first (activity rein.policy_check, which
may decide the calls), and while it waits its memo says what for (`rein.waiting`: the inbox lists it from
visibility) and a webhook tells people (activity rein.notify_waiting, when the worker has one). Asked as a wait
begins (runs that never wait record no marker), and before a described-first run's describe_agent local activity
(rein.workflows.start: a patch asked right after a local activity may be asked where a replay has not seen it)."""

PATCH_TURN_WAIT = "rein-turn-wait"
"""Since this patch a client waiting for its message's turn (`rein.wait` with a `turn`) hears that turn once it ends
or waits for a person AFTER the message was taken (a pause past the receipt's): a steer that joined a turn waiting
for a person is answered once the turn went on with it, not at once with the wait it joined. Asked by each
`rein.wait` for a turn: runs nobody waits on for a turn record no marker."""
PATCH_STOP_TURN = "rein-stop-turn"
"""Since this patch a thread's turn may be stopped (`rein.stop_turn`, a page's stop button): the model call under way
is cut, a wait for a person is settled (approvals denied, questions and client tools answered that the turn stopped)
and the turn ends with stop reason `stopped` before its next model call. Asked when a stop takes effect: turns
nobody stops record no marker."""
PATCH_RECORDED_START = "rein-recorded-start"
"""Since this patch every run records, in its first activation, that this build's rules started it (a marker):
a replay reads it back instead of the build id its first task recorded (rein.workflows.window), so the table of
earlier builds' ids never grows. A later change of how runs start is a new id."""
PATCH_BOUND_DECISIONS = "rein-bound-decisions"
"""Since this patch a decision belongs to the batch of tool calls it was made for (rein.core.machine: Decision.batch):
a later batch that repeats a call id (LiteLLM's `call_0` in every turn) waits for its own decision. Asked only when
a new batch repeats the id of a call decided earlier (runs without such a repeat record no marker); runs recorded
before it replay with the earlier rule (the decision carried over)."""

PATCH_CLIENT_PROVENANCE = "rein-client-provenance"
"""Since this patch a run ignores the `rule` and `via` fields a client sends with a decision: "decided by a rule" is
recorded only from the run's own rule check (rein.core.policy via rein.workflows.inbox), and a decision naming a rule
no longer skips the approver check. Asked only when a decision carries one of them (rein's own clients send
neither); runs recorded before it replay as they took them."""

PATCH_RULES_REACH_RUNS = "rein-rules-reach-runs"
"""ReinPolicy's, not AgentWorkflow's: since this patch an added rule that allows or denies is told to the waiting runs
it may decide by an activity of the policy workflow (rein.rules_changed, retried by Temporal), each run then asking
its rules again itself; before it, the client that added the rule decided them (rein.durable.policy's sweep).
Asked as such a rule is added; the policy workflows recorded before it replay without the activity."""
