// Drives an AG-UI server with the official client (@ag-ui/client's HttpAgent), as a web
// page would: each step adds the user's message (under the id given) and runs the agent,
// or answers the interrupts the last run left with the decision given. Prints, as JSON, what
// the client holds after each run: its messages in order, the run's result and interrupts.
//
// node drive.cjs URL '{"threadId": "...", "steps": [{"id": "user-1", "prompt": "..."},
//                                                  {"approved": true}]}'
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
    const { result } = await agent.runAgent(parameters, {
      onRunErrorEvent: ({ event }) => {
        errors.push(`${event.code}: ${event.message}`);
      },
    });
    runs.push({
      result: result ?? null,
      errors,
      interrupts: agent.pendingInterrupts.map((interrupt) => interrupt.toolCallId),
      messages: agent.messages.map(shown),
    });
  }
  process.stdout.write(JSON.stringify(runs));
}

main().catch((error) => {
  process.stderr.write(`${(error && error.stack) || error}\n`);
  process.exit(1);
});
