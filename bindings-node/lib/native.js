'use strict';
// The addon that `napi build` (npm run build) writes next to package.json. One file for the
// platform it was built on: this package is built from source where it is used.
module.exports = require('../gotry-tenant-state.node');
