// Drives an AG-UI server with the official client (@ag-ui/client's HttpAgent), as a web
// page would: each step adds the user's message (under the id given) and runs the agent,
// or answers the interrupts the last run left with the decision given. A step with "send"
// also posts that message to the run while it works (POST <url>messages, when the run's first
// tool call starts), as a person typing while the agent works. Prints, as JSON, what the
// client holds after each run: its messages in order, the run's result and interrupts, and
// the HTTP status of each message sent.
//
// node drive.cjs URL '{"threadId": "...", "steps": [{"id": "user-1", "prompt": "..."},
//                                                  {"approved": true},
//                                                  {"id": "u-3", "prompt": "...",
//                                                   "send": {"id": "u-4", "content": "..."}}]}'
const { HttpAgent } = require("@ag-ui/client");

function shown(message) {
  return {
    id: message.id,
    role: message.role,
    content: message.content ?? null,
    toolCalls: (message.toolCalls ?? []).map((call) => call.id),
    toolCallId: message.toolCallId ?? null,
  };
}

async function main() {
  const [url, planText] = process.argv.slice(2);
  const plan = JSON.parse(planText);
  const agent = new HttpAgent({ url, threadId: plan.threadId });
  const runs = [];
  for (const step of plan.steps) {
    const parameters = {};
    if (step.prompt !== undefined) {
      agent.addMessage({ id: step.id, role: "user", content: step.prompt });
    } else {
      parameters.resume = agent.pendingInterrupts.map((interrupt) => ({
        interruptId: interrupt.id,
        status: "resolved",
        payload: { approved: step.approved },
      }));
    }
    const errors = [];
    const sent = [];
    let runId = null;
    let posting = null;
    const { result } = await agent.runAgent(parameters, {
      onRunErrorEvent: ({ event }) => {
        errors.push(`${event.code}: ${event.message}`);
      },
      onRunStartedEvent: ({ event }) => {
        runId = event.runId;
      },
      onToolCallStartEvent: () => {
        if (step.send === undefined || posting !== null) return;
        const message = { id: step.send.id, role: "user", content: step.send.content };
        posting = fetch(new URL("messages", url), {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ threadId: plan.threadId, runId, message }),
        }).then((answer) => sent.push(answer.status));
      },
    });
    if (posting !== null) await posting;
    runs.push({
      result: result ?? null,
      errors,
      interrupts: agent.pendingInterrupts.map((interrupt) => interrupt.toolCallId),
      sent,
      messages: agent.messages.map(shown),
    });
  }
  process.stdout.write(JSON.stringify(runs));
}

main().catch((error) => {
  process.stderr.write(`${(error && error.stack) || error}\n`);
  process.exit(1);
});
