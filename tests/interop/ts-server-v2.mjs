// An MCP server on the official TypeScript SDK v2 (@modelcontextprotocol/server, pinned in
// package.json): its web-standard `createMcpHandler`, served on node:http through the
// SDK's own Node adapter (`toNodeHandler` of @modelcontextprotocol/node, which aborts the
// request's signal when the client's connection closes before the response ends).
// adapters/cli/tests/interop_ts_v2_server.rs runs `mcpwire call` against it.
//
// Usage: node ts-server-v2.mjs PORT MODE
//   PORT  the port on 127.0.0.1 (0: any free port)
//   MODE  dual    createMcpHandler's default (`legacy: 'stateless'`): 2026-07-28 per
//                 request, and 2025-era requests each served by a fresh stateless instance
//         modern  `legacy: 'reject'`: 2026-07-28 only
//
// Stdout: the port on the first line, then one JSON line per event the tests check:
//   {"event": "http", "method", "path", "protocolVersion", "session", "rpc"}  every HTTP
//                                   request (its MCP-Protocol-Version and Mcp-Session-Id
//                                   headers, its JSON-RPC method)
//   {"event": "http-closed", "method", "path", "rpc", "status", "finished", "session"}
//                                   its response ended (finished: written to its end, or
//                                   cut short; session: the Mcp-Session-Id it carried)
//   {"event": "instance", "era"}    the factory built a server instance ('modern'|'legacy')
//   {"event": "tool", "name", "args"}                                a tool call began
//   {"event": "progress", "step"}                                    slow_count sent a step
//   {"event": "aborted", "name", "step", "reason"}                   a tool's request
//                                   signal aborted (the client cancelled or went away)
//                                   while it waited for that step
//   {"event": "counted", "n"}                                        slow_count finished
// Tools, as in `mcpwire serve`: echo {text}; slow_count {n, delay_ms}: one
// notifications/progress per step (progress 1..n, total n) when the request carries a
// progress token, delay_ms apart, then "counted to n"; it stops when its request aborts.

import http from 'node:http';
import * as z from 'zod';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';

const [portArg, mode] = process.argv.slice(2);
if (portArg === undefined || !['dual', 'modern'].includes(mode)) {
    console.error('usage: node ts-server-v2.mjs PORT dual|modern');
    process.exit(2);
}

const log = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));

// Resolves after `ms`, or at once when `signal` aborts.
const sleep = (ms, signal) =>
    new Promise(resolve => {
        const timer = setTimeout(done, ms);
        signal.addEventListener('abort', done, { once: true });
        function done() {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
        }
    });

function mcpServer({ era }) {
    log('instance', { era });
    const server = new McpServer({ name: 'ts-v2-interop-server', version: '1.0.0' });
    server.registerTool(
        'echo',
        { description: 'Returns its text.', inputSchema: z.object({ text: z.string() }) },
        async ({ text }) => {
            log('tool', { name: 'echo', args: { text } });
            return { content: [{ type: 'text', text }] };
        }
    );
    server.registerTool(
        'slow_count',
        {
            description: 'Counts to n, one progress notification per step, delay_ms apart.',
            inputSchema: z.object({
                n: z.number().int().min(0).max(10000),
                delay_ms: z.number().int().min(0).default(0)
            })
        },
        async ({ n, delay_ms }, ctx) => {
            const { signal, notify } = ctx.mcpReq;
            const token = ctx.mcpReq._meta?.progressToken;
            log('tool', { name: 'slow_count', args: { n, delay_ms }, progressToken: token ?? null });
            let step = 0;
            const aborted = () =>
                log('aborted', { name: 'slow_count', step, reason: String(signal.reason ?? '') });
            if (signal.aborted) {
                aborted();
            } else {
                signal.addEventListener('abort', aborted, { once: true });
            }
            for (step = 1; step <= n; step++) {
                await sleep(delay_ms, signal);
                if (signal.aborted) {
                    return { content: [{ type: 'text', text: 'cancelled' }], isError: true };
                }
                if (token !== undefined) {
                    await notify({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: step, total: n }
                    });
                    // Logged only when sent before any abort.
                    if (!signal.aborted) {
                        log('progress', { step });
                    }
                }
            }
            signal.removeEventListener('abort', aborted);
            log('counted', { n });
            return { content: [{ type: 'text', text: `counted to ${n}` }] };
        }
    );
    return server;
}

const handler = createMcpHandler(mcpServer, {
    legacy: mode === 'modern' ? 'reject' : 'stateless',
    onerror: error => console.error('ts-server-v2 (handler):', error)
});
const serve = toNodeHandler(handler, {
    onerror: error => console.error('ts-server-v2 (adapter):', error)
});

// Reads a POST's body for the log, then hands it on parsed (toNodeHandler's third
// argument, as behind express.json()). mcpwire sends JSON only; a body that is not JSON
// reaches the SDK as an empty one.
function readBody(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        req.on('data', c => chunks.push(c));
        req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        req.on('error', reject);
    });
}

const httpServer = http.createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    let parsed;
    if (req.method === 'POST') {
        const text = await readBody(req);
        try {
            parsed = JSON.parse(text);
        } catch {
            parsed = undefined;
        }
    }
    const rpc = parsed?.method ?? null;
    log('http', {
        method: req.method,
        path,
        protocolVersion: req.headers['mcp-protocol-version'] ?? null,
        session: req.headers['mcp-session-id'] ?? null,
        rpc
    });
    res.on('close', () =>
        log('http-closed', {
            method: req.method,
            path,
            rpc,
            status: res.statusCode,
            finished: res.writableFinished,
            session: res.getHeader('mcp-session-id') ?? null
        })
    );
    try {
        await serve(req, res, parsed);
    } catch (error) {
        console.error('ts-server-v2:', error);
        if (!res.headersSent) {
            res.writeHead(500).end();
        }
    }
});
httpServer.listen(Number(portArg), '127.0.0.1', () => {
    console.log(String(httpServer.address().port));
});
// The test harness kills this process; a lost parent (stdin closed) ends it too.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
