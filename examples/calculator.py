"""A calculator agent whose tool calls need a person's approval.

Offline by default: a small scripted model reads the numbers in the question and
calls the tools. Set REIN_MODEL (e.g. openai/gpt-4o) and the vendor's key
(OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) to use a real model through LiteLLM.

    python examples/calculator.py "what is 12 + 30, times 2?"   # approves each call itself, and says so
    rein run rein.examples.calculator:agent "what is 2 + 3?"    # asks you at the terminal
    rein worker --agent rein.examples.calculator:agent          # serve it for ops tooling (from any directory)
"""

from __future__ import annotations

import os
import signal
import sys

_run_started = False


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: one line and exit 130, not a traceback from every task the interrupt cut short (or from the
    imports below, when it lands in the first second). Nothing is lost by leaving at once: the run is durable
    on the embedded server, and the next process that serves the calculator finishes it."""
    sys.stdout.flush()
    said = "; the run stays on the server: `rein list --agent calculator` shows it" if _run_started else ""
    start = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    print(f"{start}interrupted{said}", file=sys.stderr, flush=True)
    os._exit(130)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _interrupted)  # before the imports below (a second or more)

import re  # noqa: E402

from rein import Agent, Completion, LoopConfig, Message, StreamChunk, ToolCall, Usage, settings  # noqa: E402


def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


class ScriptedCalculatorModel:
    """Plays the model offline: add the first two numbers, then multiply by a third if given. Given a tool of
    the client's own (a web page's, rein.web.agui) and fewer than two numbers (or a question that names that tool),
    it asks the tool for a number first.
    It answers the conversation's last question (a thread's turn), each call with an id of its own."""

    async def complete(self, messages: list[Message], tools=None, **kwargs) -> Completion:
        start = max(i for i, m in enumerate(messages) if m.role == "user")
        turn = messages[start:]
        names = {c.id: c.name for m in turn for c in m.tool_calls or []}
        answers = [(names.get(m.tool_call_id or ""), m.content) for m in turn if m.role == "tool"]
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", turn[0].content)]
        numbers += [float(n) for name, text in answers if name not in ("add", "multiply")
                    for n in re.findall(r"-?\d+(?:\.\d+)?", text)]
        results = [float(text) for name, text in answers if name in ("add", "multiply") and _is_number(text)]
        refused = any(name in ("add", "multiply") and not _is_number(text) for name, text in answers)
        usage = Usage(input_tokens=sum(len(m.content) for m in messages) // 4, output_tokens=12)
        offered = [t.name for t in tools or () if t.name not in ("add", "multiply")]
        asker = next((name for name in offered if name in turn[0].content), offered[0] if offered else None)
        if refused:
            text = "I could not compute that: a tool call was not approved."
            return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=usage)
        if asker is not None and not answers and (len(numbers) < 2 or asker in turn[0].content):
            call = ToolCall(id=f"call-ask-{len(messages)}", name=asker, arguments={"question": turn[0].content})
            return _calls(call, usage)
        numbers = numbers or [0.0, 0.0]
        if not results and len(numbers) >= 2:
            call = ToolCall(id=f"call-add-{len(messages)}", name="add", arguments={"a": numbers[0], "b": numbers[1]})
            return _calls(call, usage)
        if len(results) == 1 and len(numbers) >= 3:
            call = ToolCall(id=f"call-mul-{len(messages)}", name="multiply", arguments={"a": results[0], "b": numbers[2]})
            return _calls(call, usage)
        text = f"The answer is {(results[-1] if results else numbers[0]):g}."
        return Completion(message=Message(role="assistant", content=text), finish_reason="stop", usage=usage)

    async def stream(self, messages, tools=None, **kwargs):
        completion = await self.complete(messages, tools)
        if completion.message.tool_calls:
            yield StreamChunk(type="tool_calls", tool_calls=completion.message.tool_calls)
        else:
            for word in re.findall(r"\S+\s*", completion.message.content):
                yield StreamChunk(type="text", text=word)
        yield StreamChunk(type="done", finish_reason=completion.finish_reason, usage=completion.usage)


def _is_number(text: str) -> bool:
    return re.fullmatch(r"-?\d+(?:\.\d+)?", text.strip()) is not None


def _calls(call: ToolCall, usage: Usage) -> Completion:
    return Completion(
        message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls", usage=usage
    )


model = settings.current().model  # REIN_MODEL: a LiteLLM model id; unset: the scripted model
agent = Agent(
    model,
    provider=None if model else ScriptedCalculatorModel(),
    tools=[add, multiply],
    system="You are a careful calculator. Use the tools for every arithmetic step.",
    config=LoopConfig(permission="ask", max_iterations=10),
    name="calculator",
)


def main() -> None:
    global _run_started
    question = sys.argv[1] if len(sys.argv) > 1 else "What is 12 + 30, times 2?"
    print(f"> {question}")
    _run_started = True
    result = agent.run(question)
    steps = list(result.steps)  # each run/resume returns its own steps (seed 001): collect the whole run's
    while result.status == "interrupted" and result.interrupt and result.interrupt.type == "need_approval":
        call = result.interrupt.tool_call
        print(f"  approval needed: {call.name}({call.arguments}) -> approved")
        result = agent.resume(result.session, approve=True)
        steps += result.steps
    if result.status == "interrupted" and result.interrupt:
        print(f"stopped: {result.interrupt.message}")
    else:
        print(result)
    for number, step in enumerate(steps, 1):
        print(f"  step {number}: {step.kind:5} {step.summary}")
    print(f"[{result.stop_reason} · {result.usage.total_tokens} tokens · run {result.run_id}]")


if __name__ == "__main__":
    main()
