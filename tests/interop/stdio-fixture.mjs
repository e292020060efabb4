// A small stdio MCP server for mcpwire's bridge tests (adapters/cli/tests/bridge.rs runs
// `mcpwire bridge --stdio "node stdio-fixture.mjs"`). No dependencies: newline-delimited
// JSON-RPC on stdin and stdout, a line of log on stderr at start.
//
// Tools:
//   echo {text}          the text
//   slow {ms, steps}     `steps` progress notifications (when asked for) `ms` apart, then "done"
//   die {}               exits with status 3 without answering
//   garbage {}           writes two lines that are not JSON-RPC, then answers "after garbage"
//   ask {}               asks the client (elicitation/create), answers with what it said
//   pid {}               this process's pid, to tell children apart
//
// Exits when its input ends.

import { createInterface } from 'node:readline';

const send = (message) => process.stdout.write(JSON.stringify(message) + '\n');
const text = (t) => ({ content: [{ type: 'text', text: String(t) }] });
const waiting = new Map(); // our request id -> resolve
let nextId = 0;

console.error(`stdio-fixture: started, pid ${process.pid}`);

const tools = [
    { name: 'echo', description: 'echo', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
    { name: 'slow', description: 'progress then done', inputSchema: { type: 'object' } },
    { name: 'die', description: 'exit mid-call', inputSchema: { type: 'object' } },
    { name: 'garbage', description: 'bad output lines', inputSchema: { type: 'object' } },
    { name: 'ask', description: 'elicit', inputSchema: { type: 'object' } },
    { name: 'pid', description: 'my pid', inputSchema: { type: 'object' } },
];

function ask(method, params) {
    const id = `fixture-${nextId++}`;
    send({ jsonrpc: '2.0', id, method, params });
    return new Promise((resolve) => waiting.set(id, resolve));
}

async function call(id, params) {
    const args = params.arguments ?? {};
    const token = params._meta?.progressToken;
    switch (params.name) {
        case 'echo':
            return text(args.text ?? '');
        case 'slow': {
            const steps = args.steps ?? 3;
            for (let i = 1; i <= steps; i++) {
                await new Promise((r) => setTimeout(r, args.ms ?? 50));
                if (token !== undefined) {
                    send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
                }
            }
            return text('done');
        }
        case 'die':
            console.error('stdio-fixture: dying as asked');
            process.exit(3);
            return undefined;
        case 'garbage':
            process.stdout.write('this is not JSON-RPC\n{"half": \n');
            return text('after garbage');
        case 'ask': {
            const answer = await ask('elicitation/create', {
                message: 'What is your name?',
                requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
            });
            if (answer.error) return text(`declined: ${answer.error.message}`);
            return text(`hello ${answer.result?.content?.name ?? answer.result?.action}`);
        }
        case 'pid':
            return text(process.pid);
        default:
            throw { code: -32602, message: `unknown tool ${params.name}` };
    }
}

async function handle(message) {
    if (message.id !== undefined && message.method === undefined) {
        const resolve = waiting.get(message.id);
        waiting.delete(message.id);
        resolve?.(message);
        return;
    }
    if (message.id === undefined) return; // notifications: initialized, cancelled
    const reply = (result) => send({ jsonrpc: '2.0', id: message.id, result });
    const fail = (error) => send({ jsonrpc: '2.0', id: message.id, error });
    switch (message.method) {
        case 'initialize':
            return reply({
                protocolVersion: message.params.protocolVersion,
                capabilities: { tools: {} },
                serverInfo: { name: 'stdio-fixture', version: '1.0.0' },
            });
        case 'ping':
            return reply({});
        case 'tools/list':
            return reply({ tools });
        case 'tools/call':
            try {
                return reply(await call(message.id, message.params ?? {}));
            } catch (e) {
                return fail({ code: e.code ?? -32603, message: e.message ?? String(e) });
            }
        default:
            return fail({ code: -32601, message: `no method ${message.method}` });
    }
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
    if (line.trim() === '') return;
    let message;
    try {
        message = JSON.parse(line);
    } catch {
        console.error(`stdio-fixture: not JSON: ${line}`);
        return;
    }
    handle(message);
});
lines.on('close', () => process.exit(0));
