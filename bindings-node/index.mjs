// The ES module face of the package; the CommonJS index.js is the one implementation, and
// Node finds its named exports in it.
export * from './index.js';
export { default } from './index.js';
