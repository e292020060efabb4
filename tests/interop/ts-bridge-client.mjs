// The official TypeScript SDK clients against `mcpwire bridge --stdio` in front of the
// reference server @modelcontextprotocol/server-everything (stdio mode), driven by
// adapters/cli/tests/interop_bridge.rs.
//
// Usage: node ts-bridge-client.mjs MODE URL
//   streamable  SDK 1.32 StreamableHTTPClientTransport, declaring sampling, elicitation
//               and roots: initialize forwarded to the session's child (its serverInfo
//               comes back), tools/list with the tools registered for those
//               capabilities, echo, trigger-long-running-operation with every progress
//               step in order then the result, trigger-sampling-request and
//               trigger-elicitation-request answered by this client's handlers,
//               get-roots-list, DELETE (and the session is gone after it)
//   polling     the same against `bridge --poll-ms 0`: every stream is closed right
//               after its priming event, so the SDK resumes with GET + Last-Event-ID;
//               the progress steps still arrive once each, in order, then the result
//   legacy      SDK 1.32 SSEClientTransport on .../sse (the 2024-11-05 HTTP+SSE transport):
//               tools/list, echo, the long-running operation with progress, sampling,
//               elicitation and roots round trips
//   v2          @modelcontextprotocol/client (SDK v2) with versionNegotiation 'auto':
//               2026-07-28 (sessionless, the bridge's pool), tools/list, echo, the
//               long-running operation with progress, then elicitation and sampling,
//               each asked as an `input_required` result that the client fulfils with
//               its handlers and retries with `inputResponses`; roots the same way
//
// Prints one line per fact checked, then one JSON line of results and `ok`; exits 1 with
// the reason on the first fact that does not hold, 3 after 30 s.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import {
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema
} from '@modelcontextprotocol/sdk/types.js';
import {
    Client as ClientV2,
    StreamableHTTPClientTransport as StreamableHTTPClientTransportV2
} from '@modelcontextprotocol/client';

const [mode, urlArg] = process.argv.slice(2);
if (urlArg === undefined || !['streamable', 'polling', 'legacy', 'v2'].includes(mode)) {
    console.error('usage: node ts-bridge-client.mjs streamable|polling|legacy|v2 URL');
    process.exit(2);
}
const url = new URL(urlArg);

setTimeout(() => {
    console.error(`ts-bridge-client (${mode}): timed out after 30 s`);
    dump();
    process.exit(3);
}, 30_000);

// Every HTTP exchange the transport makes, in order.
const exchanges = [];
// Each exchange's answer: the response to a POST may come on a stream before the POST
// itself is answered.
const answers = new Map();
const answeredAll = entries => Promise.all(entries.map(e => answers.get(e)));
const recordingFetch = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    let rpc;
    if (typeof init.body === 'string') {
        try {
            const body = JSON.parse(init.body);
            rpc = body.method ?? (body.result !== undefined ? 'result' : body.error ? 'error' : undefined);
        } catch {
            rpc = 'unparsable';
        }
    }
    const entry = {
        method: init.method ?? 'GET',
        path: new URL(String(input instanceof Request ? input.url : input)).pathname,
        lastEventId: headers.get('last-event-id') ?? undefined,
        protocolVersion: headers.get('mcp-protocol-version') ?? undefined,
        rpc
    };
    exchanges.push(entry);
    const answered = fetch(input, init);
    answers.set(entry, answered.catch(() => undefined));
    const response = await answered;
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type') ?? undefined;
    return response;
};

const transportErrors = [];
const clientErrors = [];
// What each handler was asked, in order.
const asked = [];

function dump() {
    console.error(`transport errors: ${JSON.stringify(transportErrors)}`);
    console.error(`client errors: ${JSON.stringify(clientErrors)}`);
    console.error(`asked: ${JSON.stringify(asked)}`);
    console.error(`exchanges: ${JSON.stringify(exchanges)}`);
}

function check(condition, what) {
    if (!condition) {
        throw new Error(`FAILED: ${what}`);
    }
    console.log(`checked: ${what}`);
}

const MODEL = 'bridge-test-model';
const ELICITED = { name: 'Ada', check: true, integer: 7 };
const ROOTS = [{ uri: 'file:///tmp/bridge-interop', name: 'bridge-interop' }];

function sampled(params) {
    asked.push({ method: 'sampling/createMessage', params });
    return {
        role: 'assistant',
        content: { type: 'text', text: 'sampled through the bridge' },
        model: MODEL,
        stopReason: 'endTurn'
    };
}

function elicited(params) {
    asked.push({ method: 'elicitation/create', params });
    return { action: 'accept', content: ELICITED };
}

function rooted() {
    asked.push({ method: 'roots/list' });
    return { roots: ROOTS };
}

/// The texts of a tool result's contents, joined.
function textOf(result) {
    return (result?.content ?? []).map(c => c.text ?? '').join('\n');
}

const STEPS = 4;
const LONG_OP = { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: STEPS } };
const EXPECTED_TOOLS = [
    'echo',
    'trigger-long-running-operation',
    'trigger-sampling-request',
    'trigger-elicitation-request'
];

// The SDK 1.32 flow: streamable, polling, legacy.
async function v1() {
    const transport =
        mode === 'legacy'
            ? new SSEClientTransport(url, { fetch: recordingFetch })
            : new StreamableHTTPClientTransport(url, { fetch: recordingFetch });
    transport.onerror = error => transportErrors.push(String(error?.message ?? error));
    // Every JSON-RPC message the transport hands to the client, in order (the client
    // chains a handler set before connect() ahead of its own).
    const received = [];
    transport.onmessage = message => received.push(message);
    let negotiated;
    const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
    transport.setProtocolVersion = version => {
        negotiated = version;
        setProtocolVersion?.(version);
    };

    const client = new Client(
        { name: 'mcpwire-bridge-interop', version: '1.0.0' },
        { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } }
    );
    client.onerror = error => clientErrors.push(String(error?.message ?? error));
    client.setRequestHandler(CreateMessageRequestSchema, request => sampled(request.params));
    client.setRequestHandler(ElicitRequestSchema, request => elicited(request.params));
    client.setRequestHandler(ListRootsRequestSchema, () => rooted());

    await client.connect(transport);
    const server = client.getServerVersion();
    check(server?.name === 'mcp-servers/everything', `serverInfo is the child's (${JSON.stringify(server)})`);
    check(
        (client.getInstructions() ?? '').includes('Everything Server'),
        "the child's instructions come through"
    );
    if (mode === 'legacy') {
        // HTTP+SSE is the transport; the version is whatever initialize agreed (the SDK
        // offers its latest, and the child accepts it).
        check(
            ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'].includes(negotiated),
            `initialize agreed on a version (${negotiated})`
        );
    } else {
        check(
            ['2025-03-26', '2025-06-18', '2025-11-25'].includes(negotiated),
            `a session-era version was negotiated (${negotiated})`
        );
        check(typeof transport.sessionId === 'string' && transport.sessionId.length > 0, 'a session id');
    }

    // The conditional tools are registered (and announced) just after initialized.
    let names = [];
    for (let i = 0; i < 20; i++) {
        const { tools } = await client.listTools();
        names = tools.map(t => t.name);
        if (EXPECTED_TOOLS.every(t => names.includes(t))) break;
        await new Promise(r => setTimeout(r, 100));
    }
    for (const tool of EXPECTED_TOOLS) {
        check(names.includes(tool), `tools/list names ${tool}`);
    }

    const text = 'héllo through the bridge ✓ "q"';
    const echo = await client.callTool({ name: 'echo', arguments: { message: text } });
    check(textOf(echo) === `Echo: ${text}`, `echo answers (${JSON.stringify(echo)})`);
    check(echo.isError !== true, 'echo is no error');

    // The long-running operation: every progress step, in order, then the result.
    const progress = [];
    const tokens = [];
    const first = received.length;
    const op = await client.callTool(LONG_OP, undefined, {
        onprogress: p => progress.push([p.progress, p.total]),
        onresumptiontoken: token => tokens.push(token),
        resetTimeoutOnProgress: true,
        timeout: 20_000
    });
    check(
        textOf(op).includes(`Long running operation completed. Duration: 1 seconds, Steps: ${STEPS}.`),
        `the long-running operation completes (${JSON.stringify(op)})`
    );
    const steps = Array.from({ length: STEPS }, (_, i) => [i + 1, STEPS]);
    const call = received.slice(first);
    const resultAt = call.findIndex(m => m.id !== undefined && (m.result !== undefined || m.error !== undefined));
    check(resultAt >= 0, 'the result came through the transport');
    const wire = call.slice(0, resultAt).filter(m => m.method === 'notifications/progress');
    check(
        JSON.stringify(wire.map(m => [m.params.progress, m.params.total])) === JSON.stringify(steps),
        `progress on the wire: every step once, in order, before the result (${JSON.stringify(wire.map(m => m.params))})`
    );
    const token = wire[0]?.params?.progressToken;
    check(wire.every(m => m.params.progressToken === token), 'every step carries the call\'s progress token');
    const late = call.slice(resultAt + 1).filter(m => m.method === 'notifications/progress');
    check(late.length === 0, 'no progress after the result');
    // Through onprogress. With the legacy EventSource the SDK may drop the last step when
    // it reaches the client in one chunk with the result (typescript-sdk#2580).
    const dropped = steps.slice(progress.length);
    check(
        JSON.stringify(progress) === JSON.stringify(steps.slice(0, progress.length)),
        `onprogress in order (${JSON.stringify(progress)})`
    );
    if (mode === 'legacy') {
        const unknown = clientErrors.filter(e => e.includes('progress notification for an unknown token'));
        check(dropped.length <= 1, `at most the last step races the result (${dropped.length} missing)`);
        check(unknown.length === dropped.length, 'only steps the SDK reports as raced are missing');
    } else {
        check(dropped.length === 0, 'every step reached onprogress');
    }

    // Sampling: the child asks this client during the tools/call.
    const askedBefore = asked.length;
    const sampling = await client.callTool(
        { name: 'trigger-sampling-request', arguments: { prompt: 'say hi', maxTokens: 20 } },
        undefined,
        { timeout: 20_000 }
    );
    check(textOf(sampling).includes(MODEL), `the sampling result carries this client's answer (${textOf(sampling)})`);
    const samplingAsk = asked.slice(askedBefore).find(a => a.method === 'sampling/createMessage');
    check(
        JSON.stringify(samplingAsk?.params?.messages ?? []).includes('say hi'),
        'the child\'s sampling request reached the handler with the prompt'
    );

    // Elicitation, form mode.
    const elicitation = await client.callTool(
        { name: 'trigger-elicitation-request', arguments: {} },
        undefined,
        { timeout: 20_000 }
    );
    check(textOf(elicitation).includes('Name: Ada'), `the elicitation result carries the answer (${textOf(elicitation)})`);
    check(
        asked.some(a => a.method === 'elicitation/create' && a.params?.requestedSchema?.properties?.name),
        'the child\'s elicitation request reached the handler with its schema'
    );

    // Roots: the child asks once on its own, 350 ms after initialized (during the calls
    // above), and keeps the answer; get-roots-list shows it.
    const rootsBefore = asked.filter(a => a.method === 'roots/list').length;
    const roots = await client.callTool({ name: 'get-roots-list', arguments: {} }, undefined, {
        timeout: 20_000
    });
    check(textOf(roots).includes(ROOTS[0].uri), `get-roots-list shows this client's root (${textOf(roots)})`);

    const result = {
        mode,
        protocolVersion: negotiated,
        server,
        progress: progress.length,
        wireProgress: wire.length,
        eventIds: tokens.length,
        rootsBefore,
        rootsAsked: asked.filter(a => a.method === 'roots/list').length
    };

    if (mode === 'legacy') {
        const posts = exchanges.filter(e => e.method === 'POST');
        await answeredAll(posts);
        check(posts.length > 0 && posts.every(p => p.path === '/messages' && p.status === 202),
            'every message was POSTed to /messages and answered 202');
        const gets = exchanges.filter(e => e.method === 'GET');
        check(gets.length === 1 && gets[0].status === 200, 'one SSE stream');
        check(transportErrors.length === 0, 'no transport errors');
        check(
            clientErrors.filter(e => !e.includes('progress notification for an unknown token')).length === 0,
            'no client errors'
        );
        await client.close();
    } else {
        const resumes = exchanges.filter(e => e.method === 'GET' && e.lastEventId !== undefined);
        result.resumes = resumes.length;
        if (mode === 'polling') {
            check(resumes.length >= 1, `the client resumed with GET + Last-Event-ID (${resumes.length})`);
            // (The standalone GET stream keeps polling too: its latest resume may still
            // be waiting for its answer.)
            const answered = resumes.filter(r => r.status !== undefined);
            check(
                answered.length >= 1 && answered.every(r => r.status === 200),
                `every resume answered is answered with a stream (${answered.length} of ${resumes.length})`
            );
            check(tokens.length >= 1, 'the tools/call stream carried event ids');
        } else {
            check(resumes.length === 0, 'nothing closed a stream early');
        }
        const initialized = exchanges.findIndex(e => e.rpc === 'notifications/initialized');
        check(initialized > 0, 'notifications/initialized was POSTed');
        for (const e of exchanges.slice(initialized)) {
            check(e.protocolVersion === negotiated, `${e.method} ${e.rpc ?? ''} names the protocol version`);
        }
        check(transportErrors.length === 0, 'no transport errors');
        check(clientErrors.length === 0, 'no client errors');

        const sessionId = transport.sessionId;
        await transport.terminateSession();
        const del = exchanges.findLast(e => e.method === 'DELETE');
        check(del?.status === 200 || del?.status === 204, `DELETE ends the session (${del?.status})`);
        check(transport.sessionId === undefined, 'the transport forgot the session');
        await client.close();
        const after = await fetch(url, {
            method: 'POST',
            headers: {
                'content-type': 'application/json',
                accept: 'application/json, text/event-stream',
                'mcp-session-id': sessionId,
                'mcp-protocol-version': negotiated
            },
            body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'ping' })
        });
        await after.body?.cancel();
        check(after.status === 404, `a request in the deleted session gets 404 (${after.status})`);
        result.sessionId = sessionId;
    }
    result.exchanges = exchanges.length;
    return result;
}

// The SDK v2 flow on 2026-07-28.
async function v2() {
    const client = new ClientV2(
        { name: 'mcpwire-bridge-interop-v2', version: '1.0.0' },
        {
            capabilities: { sampling: {}, elicitation: { form: {} }, roots: {} },
            versionNegotiation: { mode: 'auto' }
        }
    );
    client.onerror = error => clientErrors.push(String(error?.message ?? error));
    client.setRequestHandler('sampling/createMessage', request => sampled(request.params));
    client.setRequestHandler('elicitation/create', request => elicited(request.params));
    client.setRequestHandler('roots/list', () => rooted());
    const transport = new StreamableHTTPClientTransportV2(url, { fetch: recordingFetch });
    transport.onerror = error => transportErrors.push(String(error?.message ?? error));
    await client.connect(transport);
    check(client.getProtocolEra() === 'modern', `era is modern (${client.getProtocolEra()})`);
    check(
        client.getNegotiatedProtocolVersion() === '2026-07-28',
        `negotiated ${client.getNegotiatedProtocolVersion()}`
    );
    const server = client.getServerVersion();
    check(server?.name === 'mcp-servers/everything', `serverInfo is the child's (${JSON.stringify(server)})`);

    const { tools } = await client.listTools();
    const names = tools.map(t => t.name);
    for (const tool of EXPECTED_TOOLS) {
        check(names.includes(tool), `tools/list names ${tool}`);
    }

    const echo = await client.callTool({ name: 'echo', arguments: { message: 'hi v2' } });
    check(textOf(echo) === 'Echo: hi v2', `echo answers (${JSON.stringify(echo)})`);

    const progress = [];
    const op = await client.callTool(LONG_OP, {
        onprogress: p => progress.push(p),
        resetTimeoutOnProgress: true,
        timeout: 20_000
    });
    check(
        textOf(op).includes(`Long running operation completed. Duration: 1 seconds, Steps: ${STEPS}.`),
        `the long-running operation completes (${JSON.stringify(op)})`
    );
    const real = progress.filter(p => !String(p.message ?? '').startsWith('Fulfilling input required'));
    check(
        JSON.stringify(real.map(p => [p.progress, p.total])) ===
            JSON.stringify(Array.from({ length: STEPS }, (_, i) => [i + 1, STEPS])),
        `progress 1..${STEPS} in order (${JSON.stringify(progress)})`
    );

    // Elicitation through input_required: the client fulfils it with its handler and
    // retries with inputResponses.
    const elicitRounds = [];
    const elicitation = await client.callTool(
        { name: 'trigger-elicitation-request', arguments: {} },
        { onprogress: p => elicitRounds.push(p), timeout: 20_000 }
    );
    check(textOf(elicitation).includes('Name: Ada'), `the elicitation result carries the answer (${textOf(elicitation)})`);
    check(
        asked.some(a => a.method === 'elicitation/create' && a.params?.requestedSchema?.properties?.name),
        'the elicitation reached the handler with its schema'
    );
    check(
        elicitRounds.some(p => String(p.message ?? '').startsWith('Fulfilling input required')),
        `the client went through an input_required round (${JSON.stringify(elicitRounds)})`
    );

    const samplingRounds = [];
    const sampling = await client.callTool(
        { name: 'trigger-sampling-request', arguments: { prompt: 'say hi', maxTokens: 20 } },
        { onprogress: p => samplingRounds.push(p), timeout: 20_000 }
    );
    check(textOf(sampling).includes(MODEL), `the sampling result carries this client's answer (${textOf(sampling)})`);
    check(
        asked.some(a => a.method === 'sampling/createMessage' && JSON.stringify(a.params?.messages ?? []).includes('say hi')),
        'the sampling request reached the handler with the prompt'
    );
    check(
        samplingRounds.some(p => String(p.message ?? '').startsWith('Fulfilling input required')),
        `the client went through an input_required round (${JSON.stringify(samplingRounds)})`
    );

    // Roots, asked through input_required too (the pool child's own roots/list at its
    // start had no request to belong to, so it asks again now).
    const roots = await client.callTool({ name: 'get-roots-list', arguments: {} }, { timeout: 20_000 });
    check(textOf(roots).includes(ROOTS[0].uri), `get-roots-list shows this client's root (${textOf(roots)})`);

    // Every request of the flow was a POST without a session.
    const posts = exchanges.filter(e => e.method === 'POST');
    await answeredAll(posts);
    check(posts.length > 0 && posts.every(p => p.status === 200), 'every POST answered 200');
    const toolCalls = posts.filter(p => p.rpc === 'tools/call').length;
    check(toolCalls === 8, `five calls and one retry for each question (${toolCalls} tools/call POSTs)`);
    check(
        exchanges.every(e => e.method !== 'GET' && e.method !== 'DELETE'),
        'no GET stream and no DELETE: sessionless'
    );
    check(transportErrors.length === 0, 'no transport errors');
    check(clientErrors.length === 0, `no client errors (${JSON.stringify(clientErrors)})`);
    const protocolVersion = client.getNegotiatedProtocolVersion();
    await client.close();
    return {
        mode,
        protocolVersion,
        server,
        progress: real.length,
        toolCalls,
        exchanges: exchanges.length
    };
}

try {
    const result = mode === 'v2' ? await v2() : await v1();
    console.log(JSON.stringify(result));
    console.log('ok');
    process.exit(0);
} catch (e) {
    console.error(`ts-bridge-client (${mode}): ${e?.stack ?? e}`);
    dump();
    process.exit(1);
}
