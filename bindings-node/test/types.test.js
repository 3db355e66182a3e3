'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const pkg = require('..');

const ROOT = path.join(__dirname, '..');

test('index.d.ts declares every runtime export, and nothing that is not exported', () => {
    const declared = new Set();
    const source = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8');
    for (const match of source.matchAll(/^export declare (?:const|function|class) (\w+)/gm)) declared.add(match[1]);
    assert.deepEqual([...declared].sort(), Object.keys(pkg).sort());
});

test('code written against the declarations type-checks, and a type error is caught', () => {
    const tsc = require.resolve('typescript/bin/tsc');
    const config = path.join(__dirname, 'types', 'tsconfig.json');
    const ok = spawnSync(process.execPath, [tsc, '-p', config], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);

    // The same check must be able to fail: a wrong type in a copy of the usage file.
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'gotry-types-'));
    try {
        const usage = fs.readFileSync(path.join(__dirname, 'types', 'usage.ts'), 'utf8');
        const broken = usage.replace('const remaining: number =', 'const remaining: string =');
        assert.notEqual(broken, usage);
        fs.writeFileSync(path.join(dir, 'usage.ts'), broken);
        const configText = JSON.parse(fs.readFileSync(config, 'utf8'));
        configText.compilerOptions.paths['@gotry/tenant-state'] = [path.join(ROOT, 'index.d.ts')];
        fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(configText));
        const bad = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' });
        assert.notEqual(bad.status, 0);
        assert.match(bad.stdout, /TS2322/);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});
