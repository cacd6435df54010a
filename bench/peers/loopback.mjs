// Preloaded into node (node --import): a server that listens on a port
// without naming an address listens on 127.0.0.1, not on every interface.
// Portkey's start-server.js names none, and has no option for one.

import net from 'node:net';

const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (port, host, ...rest) {
    if (typeof port === 'number' && typeof host !== 'string') {
        if (host !== undefined) {
            rest.unshift(host);
        }
        return listen.call(this, port, '127.0.0.1', ...rest);
    }
    return listen.call(this, port, host, ...rest);
};
