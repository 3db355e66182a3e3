// The Node.js contention worker: the same plan as tests/harness's lease-worker.
//
//   node worker.mjs --store URL_OR_FILE --owner NAME --keys N --ttl-ms TTL --duration-ms D --acks FILE [--seed S]
//
// Pause up to 4 ms, pick a key at random; acquire it when this worker holds no epoch of it, otherwise renew,
// release or mark it forgotten. Every acknowledged operation is appended to the acks file
// as one JSON line, synchronously, before the next call. Refusals and contention are
// expected; any other failure ends the worker with status 1.
import { appendFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { openLeaseStore, TenantStateError } from '../../bindings-node/index.mjs';

const { values } = parseArgs({
  options: Object.fromEntries(
    ['store', 'owner', 'keys', 'ttl-ms', 'duration-ms', 'acks', 'seed'].map((name) => [name, { type: 'string' }]),
  ),
});
for (const name of ['store', 'owner', 'keys', 'ttl-ms', 'duration-ms', 'acks']) {
  if (values[name] === undefined) throw new Error(`--${name} is required`);
}
const keys = Math.max(1, Number.parseInt(values.keys, 10));
const ttlMs = Number.parseInt(values['ttl-ms'], 10);
const owner = values.owner;
const url = values.store.includes('://') ? values.store : `sqlite://${values.store}`;
const EXPECTED = new Set(['GOTRY_TENANT_LEASE_HELD', 'GOTRY_TENANT_LEASE_LOST', 'GOTRY_TENANT_LEASE_STORE_UNAVAILABLE']);

// mulberry32: reproducible from the seed.
let seed = Number.parseInt(values.seed ?? String(process.pid), 10) >>> 0;
function random() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

const store = await openLeaseStore(url);
const held = new Map();
let granted = 0;
let refused = 0;
const deadline = performance.now() + Number.parseInt(values['duration-ms'], 10);
while (performance.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 4)));
  const key = `k${Math.floor(random() * keys)}`;
  let epoch = held.get(key);
  let op;
  try {
    if (epoch === undefined) {
      op = 'acquire';
      epoch = (await store.acquire(key, owner, ttlMs)).record.epoch;
      held.set(key, epoch);
    } else {
      const choice = Math.floor(random() * 4);
      if (choice < 2) {
        op = 'renew';
        await store.renew(key, owner, epoch, ttlMs);
      } else if (choice === 2) {
        op = 'release';
        await store.release(key, owner, epoch);
        held.delete(key);
      } else {
        op = 'forget';
        await store.markForgotten(key, owner, epoch);
      }
    }
  } catch (error) {
    if (!(error instanceof TenantStateError) || !EXPECTED.has(error.code)) {
      console.error(`worker.mjs ${owner}: ${key}: unexpected`, error);
      process.exit(1);
    }
    if (error.code === 'GOTRY_TENANT_LEASE_LOST') held.delete(key);
    refused += 1;
    continue;
  }
  appendFileSync(values.acks, `${JSON.stringify({ key, op, owner, epoch })}\n`);
  granted += 1;
}
store.close();
console.log(`worker.mjs ${owner}: granted=${granted} refused=${refused}`);
