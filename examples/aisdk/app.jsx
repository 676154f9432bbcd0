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
const AGENT = params.get("agent") || "calculator";  // ?agent=NAME: another agent rein serves
const API = `/ai-sdk/${AGENT}`;
const HINTS = { calculator: "What is 12 + 30, times 2?", planner: "add milk and eggs" };
const chatId = params.get("chat") || `chat-${crypto.randomUUID().slice(0, 8)}`;
// Sign-in: the link serve.py prints carries the token in its fragment (never sent to a server); the page keeps it
// in this tab's sessionStorage, takes it out of the address bar, and sends it as a bearer header.
const given = new URLSearchParams(location.hash.slice(1)).get("token");
if (given) sessionStorage.setItem("rein-token", given);
params.set("chat", chatId);
history.replaceState(null, "", `?${params}`);
const token = sessionStorage.getItem("rein-token");
const headers = token ? { Authorization: `Bearer ${token}` } : {};
// The page's own tool: rein offers it to the model, and the thread waits (durably) for the page's output.
const TOOLS = [{ name: "pick_number", description: "Ask the person for a number.",
                 parameters: { type: "object", properties: { question: { type: "string" } } } }];

const CHAT = `${API}/${encodeURIComponent(chatId)}`;

function App() {
  const [initial, setInitial] = useState(null);
  useEffect(() => {
    Promise.all([
      fetch(`${CHAT}/messages`, { headers }).then((response) => (response.ok ? response.json() : [])),
      fetch(`${CHAT}/state`, { headers }).then((response) => (response.ok ? response.json() : null)),
    ]).then(([messages, state]) => setInitial({ messages, state }), () => setInitial({ messages: [], state: null }));
  }, []);
  if (initial === null) return <p id="status">Loading the chat…</p>;
  return <Chat initial={initial.messages} initialState={initial.state} />;
}

function Chat({ initial, initialState }) {
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
  // The thread's shared state: as loaded, then each `data-state` part a stream brings, or the page's own write.
  const [shared, setShared] = useState(initialState ?? { value: {}, version: 0 });
  const streamed = latestState(messages);
  useEffect(() => {
    if (streamed && streamed.version > shared.version) setShared(streamed);
  }, [streamed?.version]);
  const send = () => { if (text.trim()) { sendMessage({ text }); setText(""); } };
  const stopTurn = () => {
    fetch(`${CHAT}/stop`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: "{}" });
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
      {(shared.version > 0 || params.get("agent") === "planner") && <SharedState shared={shared} setShared={setShared} />}
      <div id="status" className={error ? "error" : ""}>{error ? `error: ${error.message}` : status}</div>
      <input id="text" value={text} placeholder={HINTS[AGENT] ?? "Ask"} autoComplete="off"
             onChange={(event) => setText(event.target.value)}
             onKeyDown={(event) => event.key === "Enter" && send()} />
      <button id="send" onClick={send}>Send</button>
      <button id="stop" onClick={stopTurn} disabled={status !== "streaming" && status !== "submitted"}>Stop</button>
    </>
  );
}

function latestState(messages) {
  let latest;
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.type === "data-state" && (!latest || part.data.version > latest.version)) latest = part.data;
    }
  }
  return latest;
}

// The to-do list in the thread's shared state (the planner agent's): the page changes it too, on the version it read;
// a write on an older version (the agent changed the list meanwhile) is refused, and the page shows the list anew.
function SharedState({ shared, setShared }) {
  const [item, setItem] = useState("");
  const [note, setNote] = useState("");
  const todos = Array.isArray(shared.value?.todos) ? shared.value.todos : [];
  const write = async (value) => {
    const response = await fetch(`${CHAT}/state`, {
      method: "PUT", headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ value, version: shared.version }),
    });
    const body = await response.json();
    if (response.ok) {
      setShared(body);
      setNote("");
    } else {
      setNote(body.error);
      const fresh = await fetch(`${CHAT}/state`, { headers });
      if (fresh.ok) setShared(await fresh.json());
    }
  };
  return (
    <div id="state">
      <strong>To do</strong> <span className="version">(version {shared.version})</span>
      <ul>
        {todos.map((todo, index) => (
          <li key={`${index}-${todo}`}>{todo}
            <button aria-label={`remove ${todo}`}
                    onClick={() => write({ ...shared.value, todos: todos.filter((_, i) => i !== index) })}>×</button>
          </li>
        ))}
      </ul>
      <input id="todo" value={item} placeholder="something to do" onChange={(e) => setItem(e.target.value)} />
      <button id="add-todo" onClick={() => { if (item.trim()) { write({ ...shared.value, todos: [...todos, item] }); setItem(""); } }}>
        Add
      </button>
      {note && <div id="state-note">{note}</div>}
    </div>
  );
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
document.getElementById("title").textContent = AGENT[0].toUpperCase() + AGENT.slice(1);
createRoot(document.getElementById("root")).render(<App />);
