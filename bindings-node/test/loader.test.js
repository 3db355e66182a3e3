'use strict';
// lib/native.js in a package laid out as npm installs a release: the platform package wins,
// and when neither it nor a local build is there, the error names the platform.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { execFileSync } = require('node:child_process');

const pkg = require('..');
const { tempDbPath } = require('./helpers');
const { platformName } = require('../lib/platform');

const packageRoot = path.join(__dirname, '..');
const localBuild = path.join(packageRoot, 'gotry-tenant-state.node');

/** A copy of the package's JavaScript under `<tmp>/node_modules/@gotry/tenant-state`, no addon. */
function installedCopy() {
    const project = path.dirname(tempDbPath());
    const main = path.join(project, 'node_modules', '@gotry', 'tenant-state');
    fs.mkdirSync(main, { recursive: true });
    for (const file of ['package.json', 'index.js']) fs.copyFileSync(path.join(packageRoot, file), path.join(main, file));
    fs.cpSync(path.join(packageRoot, 'lib'), path.join(main, 'lib'), { recursive: true });
    return project;
}

/** What `require('@gotry/tenant-state')` gives in `project`, in a process of its own. */
function loadIn(project) {
    const script = "const p = require('@gotry/tenant-state'); process.stdout.write(JSON.stringify({ version: p.version() }))";
    try {
        return { out: JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: project, stdio: 'pipe' })) };
    } catch (error) {
        return { err: String(error.stderr) };
    }
}

test('the platform package npm installed is loaded', () => {
    const project = installedCopy();
    const name = platformName();
    const platformPackage = path.join(project, 'node_modules', '@gotry', `tenant-state-${name}`);
    fs.mkdirSync(platformPackage, { recursive: true });
    const binary = `gotry-tenant-state.${name}.node`;
    fs.copyFileSync(localBuild, path.join(platformPackage, binary));
    fs.writeFileSync(
        path.join(platformPackage, 'package.json'),
        JSON.stringify({ name: `@gotry/tenant-state-${name}`, version: pkg.version(), main: binary }),
    );
    assert.deepEqual(loadIn(project), { out: { version: pkg.version() } });
});

test('with no build for this platform the error names it and the remedies', () => {
    const { err } = loadIn(installedCopy());
    assert.match(err, new RegExp(`no native build for ${platformName()}`));
    assert.match(err, new RegExp(`@gotry/tenant-state-${platformName()} is not installed`));
    assert.match(err, /npm run build/);
});

test('version() is the workspace version the package.json carries', () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8'));
    assert.equal(pkg.version(), version);
});
