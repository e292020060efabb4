// The official TypeScript SDK 1.32 client over stdio (StdioClientTransport), spawning
// `mcpwire bridge --remote URL ...` as its server: driven by
// adapters/cli/tests/interop_bridge_remote.rs, in front of `mcpwire serve` and of
// ts-server.mjs.
//
// Usage: node ts-remote-client.mjs MCPWIRE URL SERVER-NAME [BRIDGE-ARGS...]
//   MCPWIRE      the mcpwire binary
//   URL          the remote endpoint (/mcp, or /sse with --revision legacy)
//   SERVER-NAME  the serverInfo.name the remote server gives (the bridge passes it on)
//   BRIDGE-ARGS  more arguments for `mcpwire bridge` (--revision R, -H ...)
// Calls `ask` (an elicitation round trip through the bridge) when the server lists it.
//
// Prints one line per fact checked, then `ok`; exits 1 with the reason on the first fact
// that does not hold, 3 after 30 s.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, url, serverName, ...bridgeArgs] = process.argv.slice(2);

setTimeout(() => {
    console.error('ts-remote-client: timed out after 30 s');
    process.exit(3);
}, 30_000).unref();

function check(condition, what) {
    if (!condition) {
        console.error(`FAILED: ${what}`);
        process.exit(1);
    }
    console.log(`checked: ${what}`);
}

const client = new Client(
    { name: 'ts-stdio-client', version: '1.0.0' },
    { capabilities: { elicitation: {} } },
);
let elicited = 0;
client.setRequestHandler(ElicitRequestSchema, async request => {
    elicited += 1;
    check(request.params.message === 'What is your name?', 'the elicitation came through the bridge');
    return { action: 'accept', content: { name: 'Ada' } };
});
const transport = new StdioClientTransport({
    command: bin,
    args: ['bridge', '--remote', url, ...bridgeArgs],
    stderr: 'inherit',
});
const clientErrors = [];
client.onerror = e => clientErrors.push(String(e));
await client.connect(transport);
// Every message as the transport delivered it, in order.
const received = [];
const dispatch = transport.onmessage;
transport.onmessage = (message, extra) => {
    received.push(message);
    dispatch(message, extra);
};
check(client.getServerVersion()?.name === serverName,
    `serverInfo is the remote server's (${JSON.stringify(client.getServerVersion())})`);
check(client.getServerCapabilities()?.tools !== undefined, 'the remote capabilities are passed on');

const { tools } = await client.listTools();
const names = tools.map(t => t.name);
check(names.includes('echo') && names.includes('slow_count'), `tools/list (${names})`);

const echo = await client.callTool({ name: 'echo', arguments: { text: 'through stdio' } });
check(echo.content?.[0]?.text === 'through stdio', `echo (${JSON.stringify(echo)})`);

const progress = [];
const first = received.length;
const counted = await client.callTool(
    { name: 'slow_count', arguments: { n: 3, delay_ms: 30 } },
    undefined,
    { onprogress: p => progress.push(p.progress) },
);
check(counted.content?.[0]?.text === '3', `slow_count answers 3 (${JSON.stringify(counted)})`);
// On the bridge's output: every step once, in order, all before the result.
const call = received.slice(first);
const resultAt = call.findIndex(m => m.id !== undefined && m.result !== undefined);
const wire = call.slice(0, resultAt).filter(m => m.method === 'notifications/progress');
check(wire.map(m => m.params.progress).join(',') === '1,2,3',
    `every progress step once, in order, before the result (${wire.map(m => m.params.progress)})`);
// Through onprogress: the SDK dispatches a notification a microtask later than a
// response, so a step that reaches it in one read with the result is dropped and
// reported as "unknown token" (modelcontextprotocol/typescript-sdk#2580); the rest must
// be there, in order.
const unknown = clientErrors.filter(e => e.includes('unknown token')).length;
check(progress.join(',') === [1, 2, 3].slice(0, 3 - unknown).join(','),
    `onprogress in order (${progress}; ${unknown} raced the result in the SDK)`);

if (names.includes('ask')) {
    const asked = await client.callTool({ name: 'ask', arguments: {} });
    check(asked.content?.[0]?.text === 'hello Ada', `the answer went back (${JSON.stringify(asked)})`);
    check(elicited === 1, 'one elicitation');
}

// A cancelled call: the bridge gives it up, and the client goes on.
const abort = new AbortController();
const pending = client.callTool(
    { name: 'slow_count', arguments: { n: 100, delay_ms: 50 } },
    undefined,
    { signal: abort.signal, onprogress: () => abort.abort('enough') },
);
const outcome = await pending.then(() => 'answered', e => `rejected: ${e}`);
check(outcome.startsWith('rejected'), `the cancelled call is rejected (${outcome})`);
const after = await client.callTool({ name: 'echo', arguments: { text: 'after' } });
check(after.content?.[0]?.text === 'after', 'a call after the cancel is answered');

const exited = new Promise(resolve => transport.onclose = resolve);
await client.close();
await exited;
check(true, 'the bridge ended with its input');
console.log('ok');
process.exit(0);
