// tooldeck web: the chat page. Renders the conversation the page embeds, sends prompts to the
// AG-UI endpoint and renders its events as they stream, and sends the decisions on calls
// that wait (approve, edit, reject; an external call's result). A message typed while a run
// works is added to it (POST /agui/messages): shown queued, then sent once it joined the
// conversation before the agent's next model request. Plain JS, no build step.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("thread-data").textContent);
  const thread = document.getElementById("thread");
  const status = document.getElementById("status");
  const form = document.getElementById("ask");
  const prompt = document.getElementById("prompt");
  const send = document.getElementById("send");
  const cards = new Map(); // tool call id -> {root, args, argsText, time, body}
  const texts = new Map(); // message id -> element
  let decisions = []; // the calls a paused run waits for, each with its decision once made
  let lastState = null;
  let running = null; // the client's id of the run going on, while one is
  const queued = new Map(); // message id -> the bubble of a message sent to the running run
  const joinedText = new Map(); // id of a user message that joined -> its bubble to fill, or null
  const subagents = new Map(); // subagent run id (an agent tool's run) -> "planner › clerk"

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function contentText(content) {
    if (typeof content === "string") return content;
    return (content || []).filter((p) => p.type === "text").map((p) => p.text).join("");
  }

  function pretty(text) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch (error) {
      return text;
    }
  }

  function newId(prefix) {
    // crypto.randomUUID needs a secure context; a server on 0.0.0.0 may be reached over http
    const bytes = crypto.getRandomValues(new Uint8Array(12));
    return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function duration(seconds) {
    if (typeof seconds !== "number") return "";
    return seconds < 1 ? (seconds * 1000).toFixed(1) + " ms" : seconds.toFixed(2) + " s";
  }

  function follow() {
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 160;
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  // --- the conversation --------------------------------------------------------------------

  function addUser(text) {
    const title = document.getElementById("chat-title");
    if (!thread.querySelector(".msg.user")) {
      title.textContent = text.split(/\s+/).join(" ").slice(0, 80);
    }
    const bubble = el("div", "msg user", text);
    thread.append(bubble);
    follow();
    return bubble;
  }

  // A message typed while the run works: queued until it joins the conversation (the run's
  // stream says so with a user TEXT_MESSAGE_START under its id), or refused.
  function sendToRun(text) {
    const id = newId("user-");
    const bubble = addUser(text);
    bubble.classList.add("queued");
    bubble.dataset.messageId = id;
    bubble.append(el("span", "msg-state", "queued: the agent reads it before its next step"));
    queued.set(id, bubble);
    const body = { threadId: data.threadId, runId: running, message: { id, role: "user", content: text } };
    fetch(data.endpoint + "messages", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    }).then(async (response) => {
      if (response.ok) return;
      const refused = await response.json().catch(() => ({ error: response.statusText }));
      markUser(id, "unsent", "not sent: " + refused.error);
    }).catch((error) => markUser(id, "unsent", "not sent: " + error.message));
  }

  function markWaiting(id) {
    const bubble = queued.get(id);
    if (bubble && bubble.classList.contains("queued")) {
      bubble.querySelector(".msg-state").textContent = "queued: it joins when the run goes on";
    }
  }

  function markUser(id, state, words) {
    const bubble = queued.get(id);
    if (!bubble || !bubble.classList.contains("queued")) return;
    bubble.classList.remove("queued");
    bubble.classList.add(state);
    bubble.querySelector(".msg-state").textContent = words;
  }

  function textOf(id) {
    let node = texts.get(id);
    if (!node) {
      node = el("div", "msg assistant");
      node.dataset.messageId = id;
      thread.append(node);
      texts.set(id, node);
    }
    return node;
  }

  function addCall(id, name) {
    const root = el("div", "call running");
    root.dataset.callId = id;
    const head = el("div", "call-head");
    const time = el("span", "time");
    time.append(el("span", "spinner"));
    head.append(el("span", "name", name), time);
    const args = el("pre", "json");
    const body = el("div", "call-body");
    root.append(head, el("div", "label", "arguments"), args, body);
    thread.append(root);
    const card = { root, args, argsText: "", time, body, name };
    cards.set(id, card);
    follow();
    return card;
  }

  // A call decided on in its own card (a program's call that waited) starts there again.
  function startCall(id, name) {
    const card = cards.get(id);
    if (!card || !card.root.classList.contains("waiting")) return addCall(id, name);
    card.root.classList.replace("waiting", "running");
    card.argsText = "";
    card.time.replaceChildren(el("span", "spinner"));
    return card;
  }

  function addArgs(card, delta) {
    card.argsText += delta;
    card.args.textContent = card.argsText;
  }

  function closeArgs(card) {
    card.args.textContent = pretty(card.argsText || "{}");
  }

  function setResult(callId, content, how) {
    const card = cards.get(callId) || addCall(callId, "call");
    card.root.classList.remove("running", "waiting");
    card.time.textContent = how ? duration(how.durationS) : "";
    const code = how ? how.errorCode : content.startsWith("error[") ? "error" : null;
    if (how && how.decision) showDecided(callId, how);  // ran under a remembered approval
    if (code === "rejected" || content.startsWith("error[rejected]")) {
      card.root.classList.add("rejected");
    } else if (code) {
      card.root.classList.add("failed");
    }
    card.body.append(el("div", "label", "result"), el("pre", "result", content));
    const revealed = searchReveals(card.name, content);
    if (revealed.length) {
      card.body.append(el("div", "search-log", "⌕ revealed " + revealed.join(", ")));
    }
    if (how && how.error) {
      card.body.append(el("div", "label", "exception"), el("pre", "result failed", how.error));
    }
    follow();
  }

  // A tool search's answer (tooldeck.search.FOUND, then "name: description" lines): the
  // tools it revealed, shown to the model from its next turn.
  function searchReveals(name, content) {
    const found = "tools found (callable from your next turn):\n";
    if (name !== "search_tools" || !content.startsWith(found)) return [];
    const lines = content.slice(found.length).split("\n");
    return lines.map((line) => line.split(": ")[0]).filter(Boolean);
  }

  function addData(value) {
    const box = el("div", "data");
    box.append(el("div", "label", "typed answer"));
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const table = el("table");
      for (const [key, item] of Object.entries(value)) {
        const row = el("tr");
        const shown = typeof item === "object" ? JSON.stringify(item) : String(item);
        row.append(el("td", "", key), el("td", "", shown));
        table.append(row);
      }
      box.append(table);
    } else {
      box.append(el("pre", "json", JSON.stringify(value, null, 2)));
    }
    thread.append(box);
  }

  function addFoot(state) {
    const foot = el("div", "run-foot");
    const link = el("a", "", "run " + state.runId.slice(0, 12));
    link.href = "/runs/" + encodeURIComponent(state.runId);
    const usage = state.usage;
    const parts = [usage.requests + " model turn" + (usage.requests === 1 ? "" : "s")];
    if (usage.inputTokens || usage.outputTokens) {
      parts.push(usage.inputTokens + " in / " + usage.outputTokens + " out tokens");
    }
    if (state.stopReason === "paused") {
      parts.push("waits for decisions");
    } else if (state.answered === false) {
      parts.push("stopped without an answer (" + state.stopReason + ")");  // a limit, a cancel
    }
    foot.append(link, document.createTextNode(" · " + parts.join(" · ")));
    thread.append(foot);
  }

  // the run log's names of approvals with a scope, and of calls run under a remembered one
  const SCOPED = {
    "approved:run": "Approved for the rest of this run",
    "approved:session": "Approved for this conversation",
    "remembered:run": "Approved earlier for this run (not asked again)",
    "remembered:session": "Approved earlier for this conversation (not asked again)",
  };

  function decidedText(decided) {
    // the words the page showed when the decision was made (decide's ``shown``)
    if (decided.decision === "approved") {
      return decided.edited ? "Approved with edited arguments" : "Approved";
    }
    const scoped = SCOPED[decided.decision];
    if (scoped) return scoped;
    return decided.decision === "rejected" ? "Rejected" : "Answered";
  }

  function showDecided(callId, decided) {
    const card = cards.get(callId);
    if (!card) return;
    const box = el("div", "decide");
    box.append(el("div", "decided", decidedText(decided)));
    card.body.append(box);
  }

  // The conversation as the session keeps it, with what the run log adds: each run's foot
  // (its link) after its last message, and the decisions made on its calls.
  function renderHistory() {
    const runs = data.runs || [];
    const decided = new Map();
    for (const d of data.decisions || []) decided.set(d.runId + "\n" + d.callId, d);
    let next = 0; // the run the next message belongs to
    data.messages.forEach((message, index) => {
      const runId = next < runs.length ? runs[next].runId : "";
      if (message.role === "user") {
        addUser(contentText(message.content));
      } else if (message.role === "assistant") {
        if (message.content) textOf(message.id).textContent = message.content;
        for (const call of message.toolCalls || []) {
          const card = addCall(call.id, call.function.name);
          addArgs(card, call.function.arguments);
          closeArgs(card);
        }
      } else if (message.role === "tool") {
        const decision = decided.get(runId + "\n" + message.toolCallId);
        if (decision) showDecided(message.toolCallId, decision);
        setResult(message.toolCallId, contentText(message.content), null);
      }
      while (next < runs.length && runs[next].end === index + 1) {
        if (runs[next].usage) addFoot(runs[next]);
        next += 1;
      }
    });
    if (data.logProblem) setStatus("The run log could not be read: " + data.logProblem, true);
    if (data.pending.length) askFor(data.pending, data.interrupts);
    window.scrollTo(0, document.body.scrollHeight);
  }

  // --- decisions on the calls a run waits for ----------------------------------------------

  function askFor(pending, interrupts) {
    decisions = pending.map((call) => ({
      call,
      interrupt: interrupts.find((i) => i.id === call.interruptId) || null,
      answer: null,
    }));
    for (const item of decisions) decisionCard(item);
    busy(false);
    // The first call to decide on is in view, above the prompt box (which is not sticky while
    // calls wait: it would cover them).
    if (decisions.length) decisions[0].box.scrollIntoView({ block: "nearest" });
  }

  function decisionCard(item) {
    const call = item.call;
    // the run's own calls by their call id (a program's runs under it once decided)
    const key = call.own ? call.callId : call.id;
    // (an agent tool's call streamed in its card before the run paused: it waits there)
    let card = cards.get(key);
    if (!card || (call.path.length && call.own)) {
      card = addCall(key, [...call.path, call.tool].join(" › "));
      addArgs(card, JSON.stringify(call.arguments));
      closeArgs(card);
    }
    const outer = cards.get(call.id.split("/")[0]); // the call it waits inside
    if (call.path.length && outer && outer !== card) waitingCard(outer);
    waitingCard(card);
    const box = el("div", "decide");
    card.body.append(box);
    item.box = box;
    if (data.readOnly) {
      box.append(el("p", "", "This call waits for a decision; start tooldeck web with the " +
        "agent's tools to give it."));
    } else if (call.kind === "approval") approvalButtons(item);
    else externalForm(item);
    follow();
  }

  function waitingCard(card) {
    card.root.classList.remove("running");
    card.root.classList.add("waiting");
    card.time.textContent = "waiting";
  }

  function approvalButtons(item) {
    const box = item.box;
    box.replaceChildren(el("p", "", "This call waits for your approval."), ...about(item.call));
    const buttons = el("div", "buttons");
    const approveButton = el("button", "", "Approve");
    const editButton = el("button", "secondary", "Edit arguments");
    const rejectButton = el("button", "danger", "Reject");
    approveButton.type = editButton.type = rejectButton.type = "button";
    approveButton.addEventListener("click", () => decide(item, { approved: true }, "Approved"));
    editButton.addEventListener("click", () => editForm(item));
    rejectButton.addEventListener("click", () => rejectForm(item));
    buttons.append(approveButton);
    if (item.call.own) {
      // the tool's later calls run without asking: for this run, or this conversation too
      // (a code-mode program's calls are the run's own; an agent tool's run ends with it)
      for (const scope of ["run", "session"]) {
        const shown = SCOPED["approved:" + scope];
        const label = scope === "run" ? "Always in this run" : "Always in this conversation";
        const button = el("button", "secondary", label);
        button.type = "button";
        button.dataset.scope = scope;
        button.addEventListener("click", () => decide(item, { approved: true, scope }, shown));
        buttons.append(button);
      }
    }
    buttons.append(editButton, rejectButton);
    box.append(buttons);
  }

  // Where a code-mode program makes the call, and what a program approved whole may call.
  function about(call) {
    const lines = [];
    if (call.where) {
      lines.push(el("p", "where", "The program makes this call at " + call.where));
    }
    if (call.reaches && call.reaches.length) {
      const tools = call.reaches.join(", ");
      lines.push(el("p", "reaches",
        "The program may call " + tools + ": approved, it calls them without asking."));
    }
    return lines;
  }

  function editForm(item) {
    const box = item.box;
    const area = el("textarea");
    area.rows = 6;
    area.value = JSON.stringify(item.call.arguments, null, 2);
    const problem = el("p", "problem");
    problem.hidden = true;
    const ok = el("button", "", "Approve with these arguments");
    const back = el("button", "secondary", "Back");
    ok.type = back.type = "button";
    ok.addEventListener("click", () => {
      let edited;
      try {
        edited = JSON.parse(area.value);
      } catch (error) {
        problem.textContent = "Not JSON: " + error.message;
        problem.hidden = false;
        return;
      }
      decide(item, { approved: true, editedArgs: edited }, "Approved with edited arguments");
    });
    back.addEventListener("click", () => approvalButtons(item));
    const buttons = el("div", "buttons");
    buttons.append(ok, back);
    box.replaceChildren(el("p", "", "The arguments to run it with:"), area, problem, buttons);
    area.focus();
  }

  function rejectForm(item) {
    const box = item.box;
    const reason = el("input");
    reason.type = "text";
    reason.placeholder = "Why? The model reads this.";
    const ok = el("button", "danger", "Reject the call");
    const back = el("button", "secondary", "Back");
    ok.type = back.type = "button";
    ok.addEventListener("click", () => {
      decide(item, { approved: false, reason: reason.value.trim() }, "Rejected");
    });
    back.addEventListener("click", () => approvalButtons(item));
    const buttons = el("div", "buttons");
    buttons.append(ok, back);
    box.replaceChildren(el("p", "", "Reject this call:"), reason, buttons);
    reason.focus();
  }

  function externalForm(item) {
    const box = item.box;
    const area = el("textarea");
    area.rows = 3;
    area.placeholder = "What running it gave";
    const failedLabel = el("label", "small");
    const failed = el("input");
    failed.type = "checkbox";
    failedLabel.append(failed, document.createTextNode(" it failed (the text says why)"));
    const ok = el("button", "", "Send the result");
    ok.type = "button";
    ok.addEventListener("click", () => {
      const answer = { result: area.value, failed: failed.checked };
      decide(item, answer, failed.checked ? "Answered: it failed" : "Answered");
    });
    const buttons = el("div", "buttons");
    buttons.append(ok);
    box.replaceChildren(
      el("p", "", "The application runs this tool: give its result."), area, failedLabel, buttons
    );
  }

  function decide(item, answer, shown) {
    item.answer = answer;
    item.box.replaceChildren(el("div", "decided", shown));
    const open = decisions.filter((d) => d.answer === null).length;
    if (open) {
      setStatus("Decided. " + open + " more call" + (open === 1 ? "" : "s") + " to go.");
      return;
    }
    const resume = [];
    const messages = [];
    for (const d of decisions) {
      if (d.call.kind === "approval") {
        resume.push({ interruptId: d.call.interruptId, status: "resolved", payload: d.answer });
      } else {
        const message = { id: newId("tool-"), role: "tool", toolCallId: d.call.id };
        message.content = d.answer.failed ? "" : d.answer.result;
        if (d.answer.failed) message.error = d.answer.result || "it failed";
        messages.push(message);
      }
    }
    decisions = [];
    run(input(messages, resume.length ? resume : undefined));
  }

  // --- talking to the AG-UI endpoint -------------------------------------------------------

  function input(messages, resume) {
    const body = {
      threadId: data.threadId,
      runId: newId("run-"),
      state: {},
      messages,
      tools: [],
      context: [],
      forwardedProps: {},
    };
    if (resume) body.resume = resume;
    return body;
  }

  function setStatus(text, isError) {
    status.hidden = !text;
    status.className = isError ? "status error" : "status";
    status.replaceChildren();
    if (!isError && text && text.endsWith("…")) status.append(el("span", "spinner"));
    status.append(document.createTextNode(text || ""));
  }

  function busy(working) {
    if (!form) return;
    const waiting = decisions.some((d) => d.answer === null);
    prompt.disabled = send.disabled = waiting;
    form.classList.toggle("held", waiting);
    prompt.placeholder = waiting
      ? "Decide on the waiting calls first."
      : working
        ? "Add to what the agent is doing… (it reads this before its next step)"
        : "Ask the agent… (Enter sends, Shift+Enter for a new line)";
    if (!waiting) prompt.focus();
  }

  async function run(body) {
    running = body.runId;
    busy(true);
    setStatus("Working…");
    lastState = null;
    try {
      const response = await fetch(data.endpoint, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      if (!response.ok) {
        setStatus("The server refused the request (" + response.status + "): " +
          (await response.text()), true);
        return;
      }
      await readEvents(response.body.getReader());
    } catch (error) {
      setStatus("The connection to the server was lost: " + error.message, true);
    } finally {
      running = null;
      const paused = lastState && lastState.stopReason === "paused";
      for (const id of queued.keys()) {
        if (paused) markWaiting(id);
        else markUser(id, "unsent", "not sent: the run ended first");
      }
      busy(false);
    }
  }

  async function readEvents(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of frame.split("\n")) {
          if (line.startsWith("data:")) on(JSON.parse(line.slice(5)));
        }
      }
    }
  }

  function on(event) {
    // A call inside an agent tool's run is keyed after the calls it runs in ("c1/c7"), as the
    // decision it may wait for is, and its card is named after the agent tools ("clerk › price").
    const sub = event.subagentRunId;
    const id = sub ? sub + "/" + event.toolCallId : event.toolCallId;
    if (event.type === "SUBAGENT_STARTED") {
      const outer = subagents.get(event.parentSubagentRunId);
      subagents.set(event.subagentRunId, outer ? outer + " › " + event.name : event.name);
      return;
    }
    if (sub && event.type.startsWith("TEXT_MESSAGE")) return; // its answer is its call's result
    if (event.type === "TEXT_MESSAGE_START" && event.role === "user") {
      joined(event);
      return;
    }
    if (event.type.startsWith("TEXT_MESSAGE") && joinedText.has(event.messageId)) {
      const bubble = joinedText.get(event.messageId);
      if (event.type === "TEXT_MESSAGE_CONTENT" && bubble) bubble.textContent += event.delta;
      return; // a bubble the page made shows its text already (null)
    }
    switch (event.type) {
      case "TEXT_MESSAGE_START":
        textOf(event.messageId).classList.add("streaming");
        break;
      case "TEXT_MESSAGE_CONTENT":
        textOf(event.messageId).textContent += event.delta;
        follow();
        break;
      case "TEXT_MESSAGE_END":
        textOf(event.messageId).classList.remove("streaming");
        break;
      case "TOOL_CALL_START": {
        const name = event.toolCallName;
        startCall(id, sub ? (subagents.get(sub) || sub) + " › " + name : name);
        break;
      }
      case "TOOL_CALL_ARGS":
        addArgs(cards.get(id), event.delta);
        break;
      case "TOOL_CALL_END":
        closeArgs(cards.get(id));
        break;
      case "TOOL_CALL_RESULT":
        setResult(id, contentText(event.content), (event.metadata || {}).tooldeck || null);
        break;
      case "STATE_SNAPSHOT":
        lastState = event.snapshot.tooldeck;
        break;
      case "RUN_FINISHED":
        finished(event);
        break;
      case "RUN_ERROR":
        setStatus(event.message + (event.code ? " [" + event.code + "]" : ""), true);
        break;
    }
  }

  // A message sent to the run joined its conversation: this page's bubble (by its id, or the
  // oldest still queued: one that waited through a pause comes back under its position's
  // id), else a message another client sent, shown as it streams.
  function joined(event) {
    let id = event.messageId;
    if (!queued.has(id)) {
      const waiting = [...queued.entries()].find(([, b]) => b.classList.contains("queued"));
      if (!waiting) {
        joinedText.set(id, addUser(""));
        return;
      }
      queued.set(id, waiting[1]);
      queued.delete(waiting[0]);
    }
    joinedText.set(id, null);
    const how = (event.metadata || {}).tooldeck || {};
    if (how.sent === false) markUser(id, "unsent", "kept, not sent: the run ended first");
    else markUser(id, "sent", "sent");
  }

  function finished(event) {
    setStatus("");
    if (event.result !== undefined && event.result !== null && typeof event.result !== "string") {
      addData(event.result);
    }
    if (lastState) addFoot(lastState);
    const outcome = event.outcome || { type: "success" };
    const pending = lastState ? lastState.pending : [];
    if (pending.length) askFor(pending, outcome.interrupts || []);
  }

  if (form) {
    form.addEventListener("submit", (submitted) => {
      submitted.preventDefault();
      const text = prompt.value.trim();
      if (!text) return;
      prompt.value = "";
      if (running) {
        sendToRun(text);
        return;
      }
      addUser(text);
      run(input([{ id: newId("user-"), role: "user", content: text }]));
    });
    prompt.addEventListener("keydown", (key) => {
      if (key.key === "Enter" && !key.shiftKey) {
        key.preventDefault();
        form.requestSubmit();
      }
    });
  }
  renderHistory();
  busy(false);
})();
