// Store operations per second through the package, against the core called directly on the
// same disk in the same run (examples/store_ops.rs). Each operation is a durable commit, so
// both are bound by the disk's sync; the ratio shows what the JS layer, the napi crossing and
// the hop off the event loop and back add. Run with `npm run bench`.
//
// With one operation in flight the hop costs at least one wake of the sleeping event loop
// thread by the thread that ran the call; the libuv pool round trip printed beside it (two
// such wakes, no store work) shows what a wake costs on this machine.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { SqliteLeaseStore } from '@gotry/tenant-state';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 21);
const CYCLES = Number(process.env.BENCH_CYCLES ?? 60);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-bench-'));
// A store in memory (tmpfs), where a commit's sync costs nothing: there the difference between
// the package and the core is what the package itself adds, free of the disk's noise.
const memoryDir = fs.existsSync('/dev/shm') ? fs.mkdtempSync('/dev/shm/gotry-bench-') : undefined;
process.on('exit', () => {
    fs.rmSync(dir, { recursive: true, force: true });
    if (memoryDir) fs.rmSync(memoryDir, { recursive: true, force: true });
});

execFileSync('cargo', ['build', '--quiet', '--release', '--example', 'store_ops', '-p', 'gotry-tenant-state-node'], {
    cwd: path.join(HERE, '..'),
    stdio: 'inherit',
});
const targetDir = JSON.parse(
    execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], { cwd: path.join(HERE, '..'), encoding: 'utf8', maxBuffer: 1 << 26 }),
).target_directory;
const coreBinary = path.join(targetDir, 'release', 'examples', 'store_ops');

function coreOpsPerSecond(name, folder = dir, cycles = CYCLES) {
    return Number(execFileSync(coreBinary, [path.join(folder, `core-${name}.db`), String(cycles)], { encoding: 'utf8' }));
}

/**
 * `inFlight` holders, each cycling on its own key. With one in flight every operation waits
 * for the previous one (latency: each pays the hop off the event loop and back on top of the
 * disk sync); with several, the store's lane runs them back to back and the hops overlap
 * another holder's sync (throughput of one store, whose operations the core serializes on its
 * connection anyway).
 */
async function packageOpsPerSecond(name, inFlight, folder = dir, totalCycles = CYCLES) {
    const store = new SqliteLeaseStore({ path: path.join(folder, `node-${name}-${inFlight}.db`) });
    const cycles = Math.ceil(totalCycles / inFlight);
    const holder = async key => {
        for (let i = 0; i < cycles; i += 1) {
            const grant = await store.acquire(key, 'replica', 1_000);
            await store.renew(key, 'replica', grant.record.epoch, 1_000);
            await store.release(key, 'replica', grant.record.epoch);
        }
    };
    const start = process.hrtime.bigint();
    await Promise.all(Array.from({ length: inFlight }, (_, i) => holder(`bench-${i}`)));
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    store.close();
    return (cycles * inFlight * 3) / seconds;
}

/** Microseconds of one round trip through libuv's thread pool with no store work at all. */
async function poolRoundTripUs() {
    const trips = 2_000;
    const start = process.hrtime.bigint();
    for (let i = 0; i < trips; i += 1) await fs.promises.stat(dir);
    return Number(process.hrtime.bigint() - start) / 1e3 / trips;
}

const quantile = (values, q) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)];
const median = values => quantile(values, 0.5);

const IN_FLIGHT = 4;
// Untimed: the pool's threads start, the JS is compiled, the core binary is in the page cache.
await packageOpsPerSecond('warm', 1);
await packageOpsPerSecond('warm', IN_FLIGHT);
coreOpsPerSecond('warm');
const core = [];
const sequential = [];
const pipelined = [];
const hops = [];
for (let round = 0; round < ROUNDS; round += 1) {
    // Short rounds, each side in turn, the order reversed every other round: a disk that slows
    // down or speeds up during the run (other work on the machine) affects every side alike.
    const sides = [
        async () => sequential.push(await packageOpsPerSecond(round, 1)),
        async () => core.push(coreOpsPerSecond(round)),
        async () => pipelined.push(await packageOpsPerSecond(round, IN_FLIGHT)),
    ];
    for (const side of round % 2 === 0 ? sides : sides.reverse()) await side();
    hops.push(await poolRoundTripUs());
}
/** The median per-round ratio to the core, with the middle half of the rounds beside it. */
const ratio = values => {
    const ratios = values.map((value, round) => value / core[round]);
    return `${median(ratios).toFixed(3)} (${quantile(ratios, 0.25).toFixed(2)}-${quantile(ratios, 0.75).toFixed(2)})`;
};
const show = values => values.map(v => v.toFixed(0)).join(' ');
console.log(`store ops/s (acquire, renew, release on a file store; ${CYCLES} cycles per side in each of ${ROUNDS} rounds)`);
console.log(`  core, called directly             median ${median(core).toFixed(0)}   rounds: ${show(core)}`);
console.log(`  package, 1 operation in flight    median ${median(sequential).toFixed(0)}   rounds: ${show(sequential)}`);
console.log(`  package, ${IN_FLIGHT} holders in flight      median ${median(pipelined).toFixed(0)}   rounds: ${show(pipelined)}`);
const extraUs = median(sequential.map((value, round) => 1e6 / value - 1e6 / core[round]));
console.log(`  per operation, the package adds ${extraUs.toFixed(0)} us to the core's ${(1e6 / median(core)).toFixed(0)} us; one libuv pool round trip (fs.promises.stat) takes ${median(hops).toFixed(0)} us here`);
console.log(`  package / core, median of the per-round ratios (middle half): ${ratio(sequential)} with 1 in flight, ${ratio(pipelined)} with ${IN_FLIGHT} (target: at least 0.90)`);

if (memoryDir) {
    const memoryCycles = CYCLES * 10;
    const coreUs = [];
    const packageUs = [];
    for (let round = 0; round < 7; round += 1) {
        coreUs.push(1e6 / coreOpsPerSecond(`memory-${round}`, memoryDir, memoryCycles));
        packageUs.push(1e6 / (await packageOpsPerSecond(`memory-${round}`, 1, memoryDir, memoryCycles)));
    }
    const addedUs = median(packageUs.map((us, round) => us - coreUs[round]));
    console.log(`  without the sync (a store in /dev/shm): the core takes ${median(coreUs).toFixed(0)} us an operation, the package ${median(packageUs).toFixed(0)} us (${addedUs.toFixed(0)} us more, 1 in flight)`);
}
