// An MCP server on the official TypeScript SDK, for mcpwire's interop tests
// (adapters/cli/tests/interop_ts.rs runs `mcpwire call` against it).
//
// Usage: node ts-server.mjs PORT MODE
//   PORT  the port on 127.0.0.1 (0: any free port)
//   MODE  streamable  the SDK's StreamableHTTPServerTransport on /mcp, with the SDK's
//                     in-memory event store (resumability: priming events, replay on a
//                     GET with Last-Event-ID)
//         polling     the same, and slow_count closes its request's SSE stream after its
//                     first progress step (SEP-1699, extra.closeSSEStream), so the client
//                     must resume with GET + Last-Event-ID to see the rest
//         legacy      the SDK's SSEServerTransport: GET /sse, POST /messages?sessionId=
//
// Stdout: the port on the first line, then one JSON line per event the tests check
// ({"event": "session-initialized" | "session-closed" | "resume" | "legacy-open" |
// "aborted" (slow_count saw its request cancelled) | "counted" (it ran to the end) | ...}).
// Tools, as in `mcpwire serve`: echo {text}; slow_count {n, delay_ms} (one
// notifications/progress per step when the request carries a progress token); and ask {}
// (an elicitation/create to the client, answered "hello NAME"), for requests that go
// through `mcpwire bridge --remote`.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import * as z from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';

const [portArg, mode] = process.argv.slice(2);
if (portArg === undefined || !['streamable', 'polling', 'legacy'].includes(mode)) {
    console.error('usage: node ts-server.mjs PORT streamable|polling|legacy');
    process.exit(2);
}

const log = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));

// The SDK's example store names an event `${stream}_${Date.now()}_${random}` and replays
// in the sort order of those names, so two events stored in the same millisecond (a last
// progress step and the result, say) replay in random order or not at all. Keep its
// store and replay, and only make the names sort in the order they were stored.
class OrderedEventStore extends InMemoryEventStore {
    seq = 0;
    generateEventId(streamId) {
        this.seq += 1;
        return `${streamId}_${String(this.seq).padStart(12, '0')}`;
    }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function mcpServer() {
    const server = new McpServer({ name: 'ts-interop-server', version: '1.0.0' });
    server.registerTool(
        'echo',
        { description: 'Returns its text.', inputSchema: { text: z.string() } },
        async ({ text }) => ({ content: [{ type: 'text', text }] })
    );
    server.registerTool(
        'slow_count',
        {
            description: 'Counts to n, one progress notification per step, delay_ms apart.',
            inputSchema: { n: z.number().int().min(0).max(10000), delay_ms: z.number().int().min(0).default(0) }
        },
        async ({ n, delay_ms }, extra) => {
            const token = extra._meta?.progressToken;
            for (let step = 1; step <= n; step++) {
                await sleep(delay_ms);
                if (extra.signal.aborted) {
                    log('aborted', { name: 'slow_count', step });
                    return { content: [{ type: 'text', text: 'cancelled' }], isError: true };
                }
                if (token !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: step, total: n }
                    });
                }
                if (mode === 'polling' && step === 1) {
                    // Only offered with an event store and a 2025-11-25 client: without it
                    // this mode would test nothing, so fail the call instead.
                    if (!extra.closeSSEStream) {
                        throw new Error('closeSSEStream is not offered for this request');
                    }
                    log('close-sse-stream', { request: extra.requestId });
                    extra.closeSSEStream();
                }
            }
            log('counted', { n });
            return { content: [{ type: 'text', text: String(n) }] };
        }
    );
    server.registerTool(
        'ask',
        { description: 'Asks the client for a name (elicitation/create) and greets it.', inputSchema: {} },
        async () => {
            const answer = await server.server.elicitInput({
                message: 'What is your name?',
                requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
            });
            return { content: [{ type: 'text', text: `hello ${answer.content?.name ?? answer.action}` }] };
        }
    );
    return server;
}

function readJson(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        req.on('data', c => chunks.push(c));
        req.on('end', () => {
            try {
                resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
            } catch (e) {
                reject(e);
            }
        });
        req.on('error', reject);
    });
}

function jsonError(res, status, code, message) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

// Streamable HTTP: one transport (and one McpServer) per session, as in the SDK's examples.
const eventStore = new OrderedEventStore();
const sessions = new Map();

async function streamable(req, res, url) {
    if (url.pathname !== '/mcp') {
        return jsonError(res, 404, -32000, 'Not found');
    }
    const sid = req.headers['mcp-session-id'];
    const lastEventId = req.headers['last-event-id'];
    if (req.method === 'GET' && lastEventId !== undefined) {
        log('resume', { lastEventId });
    }
    const transport = sid === undefined ? undefined : sessions.get(sid);
    if (transport) {
        if (req.method === 'DELETE') {
            log('delete', { session: sid });
        }
        return transport.handleRequest(req, res);
    }
    if (sid !== undefined) {
        return jsonError(res, 404, -32001, 'Session not found');
    }
    if (req.method !== 'POST') {
        return jsonError(res, 400, -32000, 'Bad Request: No valid session ID provided');
    }
    let body;
    try {
        body = await readJson(req);
    } catch {
        return jsonError(res, 400, -32700, 'Parse error');
    }
    if (!isInitializeRequest(body)) {
        return jsonError(res, 400, -32000, 'Bad Request: No valid session ID provided');
    }
    const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore,
        retryInterval: 50,
        onsessioninitialized: id => {
            sessions.set(id, created);
            log('session-initialized', { session: id, protocolVersion: body.params.protocolVersion });
        },
        onsessionclosed: id => {
            sessions.delete(id);
            log('session-closed', { session: id });
        }
    });
    await mcpServer().connect(created);
    return created.handleRequest(req, res, body);
}

// Legacy HTTP+SSE: GET /sse opens a session's stream, POST /messages?sessionId= feeds it.
// Nothing else is routed; a POST to /sse gets 404, as in the SDK's express examples
// (which register only app.get for the stream), so a Streamable HTTP client falls back.
const legacy = new Map();

async function legacySse(req, res, url) {
    if (req.method === 'GET' && url.pathname === '/sse') {
        const transport = new SSEServerTransport('/messages', res);
        legacy.set(transport.sessionId, transport);
        transport.onclose = () => {
            legacy.delete(transport.sessionId);
            log('legacy-closed', { session: transport.sessionId });
        };
        await mcpServer().connect(transport);
        log('legacy-open', { session: transport.sessionId });
        return;
    }
    if (req.method === 'POST' && url.pathname === '/messages') {
        const sid = url.searchParams.get('sessionId') ?? '';
        const transport = legacy.get(sid);
        if (!transport) {
            res.writeHead(404).end('No such session');
            return;
        }
        log('legacy-post', { session: sid });
        return transport.handlePostMessage(req, res);
    }
    log('unrouted', { method: req.method, path: url.pathname });
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`Cannot ${req.method} ${url.pathname}`);
}

const handler = mode === 'legacy' ? legacySse : streamable;
const httpServer = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    handler(req, res, url).catch(error => {
        console.error('ts-server:', error);
        if (!res.headersSent) {
            jsonError(res, 500, -32603, String(error));
        }
    });
});
httpServer.listen(Number(portArg), '127.0.0.1', () => {
    console.log(String(httpServer.address().port));
});
// The test harness kills this process; a lost parent (stdin closed) ends it too.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
