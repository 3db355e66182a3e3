// deriveLedgerTenantId through the package against the same derivation in plain JS with
// node:crypto's createHmac, measured in the same run. Two JS baselines: the reference's
// derivation with its claim checks (what the package replaces), and a bare HMAC without any
// check (a floor no real caller gets). Run with `npm run bench`.
import crypto from 'node:crypto';

import { deriveLedgerTenantId } from '@gotry/tenant-state';

const ROUNDS = 7;
const PER_ROUND = Number(process.env.BENCH_DERIVATIONS ?? 200_000);
const KEY = crypto.randomBytes(32);
const ISSUER = 'https://accounts.example.com/tenant/4f1c';
const SUBJECTS = Array.from({ length: 1024 }, (_, i) => `user-${i}-${crypto.randomBytes(6).toString('hex')}`);
const SEPARATOR = Buffer.from([0]);

/** The reference's checks and derivation, in plain JS. */
function claimBytes(value) {
    if (typeof value !== 'string' || value.length === 0) throw new Error('empty');
    if (value.includes('\u0000')) throw new Error('NUL');
    const bytes = Buffer.from(value, 'utf8');
    if (bytes.toString('utf8') !== value) throw new Error('lone surrogate');
    if (bytes.byteLength > 512) throw new Error('too long');
    return bytes;
}

function referenceDerive(key, issuer, subject) {
    if (!(key instanceof Uint8Array) || key.byteLength < 32) throw new Error('key');
    const mac = crypto.createHmac('sha256', key).update(claimBytes(issuer)).update(SEPARATOR).update(claimBytes(subject)).digest('hex');
    return `t-${mac.slice(0, 32)}`;
}

function bareDerive(key, issuer, subject) {
    const mac = crypto.createHmac('sha256', key).update(issuer).update(SEPARATOR).update(subject).digest('hex');
    return `t-${mac.slice(0, 32)}`;
}

for (const subject of SUBJECTS.slice(0, 16)) {
    const expected = referenceDerive(KEY, ISSUER, subject);
    if (deriveLedgerTenantId(KEY, ISSUER, subject) !== expected || bareDerive(KEY, ISSUER, subject) !== expected) {
        throw new Error('the derivations disagree');
    }
}

let sink = 0;
function nsPerCall(derive) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < PER_ROUND; i += 1) sink += derive(KEY, ISSUER, SUBJECTS[i & 1023]).length;
    return Number(process.hrtime.bigint() - start) / PER_ROUND;
}

const contenders = { package: deriveLedgerTenantId, reference: referenceDerive, bare: bareDerive };
const samples = { package: [], reference: [], bare: [] };
for (const derive of Object.values(contenders)) nsPerCall(derive); // warm-up
for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, derive] of Object.entries(contenders)) samples[name].push(nsPerCall(derive));
}
const median = values => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const m = Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, median(values)]));
console.log(`deriveLedgerTenantId (${PER_ROUND} calls x ${ROUNDS} rounds, medians; checksum ${sink % 997})`);
console.log(`  @gotry/tenant-state              ${m.package.toFixed(0)} ns/call`);
console.log(`  plain JS, reference's checks     ${m.reference.toFixed(0)} ns/call   speed-up ${(m.reference / m.package).toFixed(2)}x (target: at least 3x)`);
console.log(`  plain JS, bare createHmac        ${m.bare.toFixed(0)} ns/call   speed-up ${(m.bare / m.package).toFixed(2)}x`);
