// A minimal Lambda runtime loop for Node.js handlers, run by the container stand-in
// (container.py; its limits are listed there). Test support only.
//
// It loads the handler `_HANDLER` names (`file.export`, the file relative to
// LAMBDA_TASK_ROOT: `.js`/`.cjs` through require, `.mjs` through import()), then
// forever takes the next event from the Runtime API (AWS_LAMBDA_RUNTIME_API), calls the
// handler (async, or with a callback when it takes three arguments) and posts its result
// or its error.
'use strict';

const http = require('http');
const https = require('https');
const path = require('path');
const fs = require('fs');

const [apiHost, apiPort] = process.env.AWS_LAMBDA_RUNTIME_API.split(':');
const agent = new http.Agent({ keepAlive: true });

function api(method, route, body, headers) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(body);
    const req = http.request({
      host: apiHost, port: Number(apiPort), method, agent,
      path: `/2018-06-01/runtime${route}`,
      headers: { ...(headers || {}), ...(data ? { 'Content-Length': data.length } : {}) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

// CDK's handlers answer a custom resource with https.request({hostname, path}) (port
// 443, TLS). The emulator is plain HTTP on its own port: send those requests there.
function routeHttpsToTheEmulator() {
  if (!process.env.AWS_ENDPOINT_URL) return;
  const emulator = new URL(process.env.AWS_ENDPOINT_URL);
  if (emulator.protocol !== 'http:') return;
  const original = https.request;
  https.request = function request(first, ...rest) {
    if (typeof first === 'string' || first instanceof URL) {
      const target = new URL(first);
      if (target.hostname === emulator.hostname && target.protocol === 'https:') {
        target.protocol = 'http:';
        target.port = emulator.port;
        return http.request(target, ...rest);
      }
    } else if (first && typeof first === 'object') {
      const host = first.hostname || (first.host || '').split(':')[0];
      const port = Number(first.port || 443);
      if (host === emulator.hostname && port === 443) {
        const { agent: _ignored, ...options } = first;
        return http.request({ ...options, protocol: 'http:', port: Number(emulator.port) }, ...rest);
      }
    }
    return original.call(https, first, ...rest);
  };
}

async function loadHandler() {
  const spec = process.env._HANDLER || '';
  const dot = spec.lastIndexOf('.');
  if (dot <= 0) throw Object.assign(new Error(`Bad handler ${spec}`), { name: 'Runtime.MalformedHandlerName' });
  const base = path.resolve(process.env.LAMBDA_TASK_ROOT, spec.slice(0, dot));
  const name = spec.slice(dot + 1);
  let mod;
  if (fs.existsSync(`${base}.mjs`)) {
    mod = await import(`${base}.mjs`);
  } else {
    try {
      mod = require(fs.existsSync(`${base}.cjs`) ? `${base}.cjs` : base);
    } catch (e) {
      if (e.code === 'ERR_REQUIRE_ESM') mod = await import(`${base}.js`);
      else throw Object.assign(e, { name: e.code === 'MODULE_NOT_FOUND' ? 'Runtime.ImportModuleError' : e.name });
    }
  }
  const fn = mod[name] || (mod.default && mod.default[name]);
  if (typeof fn !== 'function') {
    throw Object.assign(new Error(`${spec} is undefined or not exported`), { name: 'Runtime.HandlerNotFound' });
  }
  return fn;
}

function errorBody(e) {
  const err = e instanceof Error ? e : new Error(String(e));
  return JSON.stringify({
    errorType: err.name || 'Error',
    errorMessage: err.message || String(e),
    stackTrace: (err.stack || '').split('\n').slice(1).map((l) => l.trim()),
  });
}

function call(handler, event, context) {
  return new Promise((resolve, reject) => {
    const done = (err, result) => (err ? reject(err) : resolve(result));
    context.done = done;
    context.succeed = (r) => resolve(r);
    context.fail = (e) => reject(e);
    try {
      const out = handler(event, context, done);
      if (out && typeof out.then === 'function') out.then(resolve, reject);
      else if (handler.length < 3) resolve(out);
    } catch (e) {
      reject(e);
    }
  });
}

let current = null;

async function main() {
  routeHttpsToTheEmulator();
  let handler;
  try {
    handler = await loadHandler();
  } catch (e) {
    console.error(e);
    await api('POST', '/init/error', errorBody(e), { 'Lambda-Runtime-Function-Error-Type': e.name || 'Runtime.InitError' });
    process.exit(1);
  }
  for (;;) {
    const next = await api('GET', '/invocation/next');
    const id = next.headers['lambda-runtime-aws-request-id'];
    const deadline = Number(next.headers['lambda-runtime-deadline-ms']);
    current = id;
    const context = {
      awsRequestId: id,
      invokedFunctionArn: next.headers['lambda-runtime-invoked-function-arn'],
      functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
      functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
      memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
      logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
      logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
      callbackWaitsForEmptyEventLoop: true,
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    };
    let event;
    try {
      event = JSON.parse(next.body.toString() || 'null');
    } catch (e) {
      await api('POST', `/invocation/${id}/error`, errorBody(e), { 'Lambda-Runtime-Function-Error-Type': 'Runtime.UnmarshalError' });
      continue;
    }
    try {
      const result = await call(handler, event, context);
      await api('POST', `/invocation/${id}/response`, JSON.stringify(result === undefined ? null : result));
    } catch (e) {
      console.error('Invoke Error', errorBody(e));
      await api('POST', `/invocation/${id}/error`, errorBody(e), { 'Lambda-Runtime-Function-Error-Type': 'Runtime.UnhandledError' });
    }
    current = null;
  }
}

process.on('uncaughtException', (e) => {
  console.error('Uncaught Exception', errorBody(e));
  const post = current ? api('POST', `/invocation/${current}/error`, errorBody(e)) : Promise.resolve();
  post.finally(() => process.exit(129));
});

main();
