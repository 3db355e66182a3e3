'use strict';

/**
 * The native handles behind the objects of one kind that this package makes, out of the
 * host's reach, and the TypeError for an argument that is not one of them.
 */
class Handles extends WeakMap {
    #refusal;

    constructor(refusal) {
        super();
        this.#refusal = refusal;
    }

    /** The handle of `object`; throws the TypeError when `object` is not of this kind. */
    of(object) {
        const handle = this.get(object);
        if (handle === undefined) throw new TypeError(this.#refusal);
        return handle;
    }
}

module.exports = { Handles };
