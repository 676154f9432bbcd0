// A React page that chats with rein's calculator agent through the AI SDK's own `useChat` (docs/web.md).
// The chat id is the rein thread id (?chat=ID); the conversation is the thread's: the page loads it
// (GET /ai-sdk/calculator/ID/messages) and resumes a turn under way (`resume: true`), so a reload, a second tab or
// another browser shows the same chat. Approvals are the SDK's tool approvals; `pick_number` is the page's own tool.
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(location.search);
const API = `/ai-sdk/${params.get("agent") || "calculator"}`;  // ?agent=NAME: another agent rein serves
const chatId = params.get("chat") || `chat-${crypto.randomUUID().slice(0, 8)}`;
if (!params.get("chat")) {
  params.set("chat", chatId);
  history.replaceState(null, "", `?${params}${location.hash}`);
}
// Where sign-in is on, the token comes in the address's fragment (#token=...): never sent to a server.
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { Authorization: `Bearer ${token}` } : {};
// The page's own tool: rein offers it to the model, and the thread waits (durably) for the page's output.
const TOOLS = [{ name: "pick_number", description: "Ask the person for a number.",
                 parameters: { type: "object", properties: { question: { type: "string" } } } }];

function App() {
  const [initial, setInitial] = useState(null);
  useEffect(() => {
    fetch(`${API}/${encodeURIComponent(chatId)}/messages`, { headers })
      .then((response) => (response.ok ? response.json() : []))
      .then(setInitial, () => setInitial([]));
  }, []);
  if (initial === null) return <p id="status">Loading the chat…</p>;
  return <Chat initial={initial} />;
}

function Chat({ initial }) {
  const transport = useMemo(() => new DefaultChatTransport({ api: API, headers, body: { tools: TOOLS } }), []);
  const { messages, sendMessage, addToolApprovalResponse, addToolOutput, status, error, stop } = useChat({
    id: chatId,
    messages: initial,
    transport,
    resume: true,
    sendAutomaticallyWhen: ({ messages: all }) =>
      lastAssistantMessageIsCompleteWithApprovalResponses({ messages: all })
      || lastAssistantMessageIsCompleteWithToolCalls({ messages: all }),
  });
  const [text, setText] = useState("");
  const state = latestState(messages);
  const send = () => { if (text.trim()) { sendMessage({ text }); setText(""); } };
  const stopTurn = () => {
    fetch(`${API}/${encodeURIComponent(chatId)}/stop`, { method: "POST", headers });
    stop();
  };
  return (
    <>
      <div id="log">
        {messages.map((message) => (
          <div key={message.id} className={`msg ${message.role}`} data-id={message.id}>
            {message.parts.map((part, index) => (
              <Part key={index} part={part} approve={addToolApprovalResponse} output={addToolOutput} />
            ))}
          </div>
        ))}
      </div>
      {state !== undefined && <div id="state">state: {JSON.stringify(state)}</div>}
      <div id="status" className={error ? "error" : ""}>{error ? `error: ${error.message}` : status}</div>
      <input id="text" value={text} placeholder="What is 12 + 30, times 2?" autoComplete="off"
             onChange={(event) => setText(event.target.value)}
             onKeyDown={(event) => event.key === "Enter" && send()} />
      <button id="send" onClick={send}>Send</button>
      <button id="stop" onClick={stopTurn} disabled={status !== "streaming" && status !== "submitted"}>Stop</button>
    </>
  );
}

function latestState(messages) {
  for (const message of [...messages].reverse()) {
    const part = [...message.parts].reverse().find((p) => p.type === "data-state");
    if (part) return part.data.value;
  }
  return undefined;
}

function Part({ part, approve, output }) {
  const [reason, setReason] = useState("");
  const [number, setNumber] = useState("");
  if (part.type === "text") return <span>{part.text}</span>;
  if (part.type === "reasoning") return <span className="reasoning">thinking: {part.text}</span>;
  if (!part.type.startsWith("tool-")) return null;
  const name = part.type.slice(5);
  const call = `${name}(${Object.entries(part.input ?? {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")})`;
  if (part.state === "approval-requested") {
    return (
      <div className="approval">
        Approve {call}?
        <button onClick={() => approve({ id: part.approval.id, approved: true })}>Approve</button>
        <input className="reason" placeholder="why not?" value={reason} onChange={(e) => setReason(e.target.value)} />
        <button onClick={() => approve({ id: part.approval.id, approved: false, reason })}>Deny</button>
      </div>
    );
  }
  if (part.state === "input-available" && name === "pick_number") {
    return (
      <div className="asks">
        The agent asks for a number: {part.input?.question}
        <input id="number" value={number} onChange={(e) => setNumber(e.target.value)} />
        <button onClick={() => output({ tool: "pick_number", toolCallId: part.toolCallId, output: number })}>
          Send number
        </button>
      </div>
    );
  }
  if (part.state === "output-available") return <span className="tool">{call} → {String(part.output)}</span>;
  if (part.state === "output-denied") {
    return <span className="tool">{call} denied{part.approval?.reason ? `: ${part.approval.reason}` : ""}</span>;
  }
  if (part.state === "output-error") return <span className="tool">{call} failed: {part.errorText}</span>;
  return <span className="tool">{call} …</span>;
}

document.getElementById("chat").textContent = chatId;
createRoot(document.getElementById("root")).render(<App />);
