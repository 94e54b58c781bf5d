// Drives a tooldeck A2A server with the official JavaScript client (@a2a-js/sdk):
//   node drive.cjs URL TOKEN TRANSPORT PROMPT
// TRANSPORT is JSONRPC or HTTP+JSON. It reads the card, streams PROMPT in a new task, and,
// when the task waits for input, approves every pending call in a reply to the task and
// streams that. Each step prints one JSON line: what the client read.
const {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} = require("@a2a-js/sdk/client");
const { randomUUID } = require("node:crypto");

const [url, token, transport, prompt] = process.argv.slice(2);
const authorized = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  if (token) headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const say = (what) => process.stdout.write(JSON.stringify(what) + "\n");
const textOf = (parts) =>
  parts.filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("");
const dataOf = (parts) =>
  parts.filter((p) => p.content?.$case === "data").map((p) => p.content.value);

async function stream(client, message) {
  const seen = [];
  let last = null;
  for await (const event of client.sendMessageStream({ message })) {
    const { $case, value } = event.payload;
    if ($case === "task") last = { taskId: value.id, contextId: value.contextId, state: value.status.state };
    if ($case === "statusUpdate") {
      const parts = value.status.message ? value.status.message.parts : [];
      last = { taskId: value.taskId, contextId: value.contextId, state: value.status.state,
               text: textOf(parts), data: dataOf(parts) };
    }
    if ($case === "artifactUpdate") seen.push({ artifact: value.artifact.artifactId, text: textOf(value.artifact.parts) });
    seen.push({ event: $case, state: last && last.state });
  }
  return { seen, last };
}

function message(parts, ids = {}) {
  return { messageId: randomUUID(), role: 1, parts, contextId: ids.contextId || "",
           taskId: ids.taskId || "", metadata: undefined, extensions: [], referenceTaskIds: [] };
}

async function main() {
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [
      new JsonRpcTransportFactory({ fetchImpl: authorized }),
      new RestTransportFactory({ fetchImpl: authorized }),
    ],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authorized }),
    preferredTransports: [transport],
  });
  const client = await new ClientFactory(options).createFromUrl(url);
  const card = await client.getAgentCard();
  say({ step: "card", name: card.name, skills: card.skills.map((s) => s.id),
        streaming: card.capabilities.streaming, schemes: Object.keys(card.securitySchemes),
        transport: client.transport.protocolName });
  const first = await stream(client, message([{ content: { $case: "text", value: prompt } }]));
  say({ step: "sent", ...first });
  let last = first.last;
  if (last.state === 6) {
    const calls = last.data.flatMap((d) => d.calls || []);
    const decisions = calls.map((c) => ({ id: c.id, decision: "approve" }));
    const reply = message(
      [{ content: { $case: "data", value: { kind: "tooldeck.decisions", decisions } } }],
      { taskId: last.taskId, contextId: last.contextId },
    );
    const second = await stream(client, reply);
    say({ step: "replied", ...second });
    last = second.last;
  }
  const task = await client.getTask({ id: last.taskId, tenant: "", historyLength: undefined });
  say({ step: "task", state: task.status.state, answer: textOf(task.status.message ? task.status.message.parts : []),
        artifacts: task.artifacts.map((a) => a.artifactId) });
}

main().catch((error) => {
  say({ step: "error", error: String(error && (error.stack || error)) });
  process.exit(1);
});
