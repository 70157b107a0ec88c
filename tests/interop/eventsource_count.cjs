// A standard EventSource client (the `eventsource` package from npm, the WHATWG algorithm for
// Node) left open on one URL for a while: prints, as one JSON line, how many HTTP requests it
// made, the status of each, and the `status` events it received.
//
// Usage: NODE_PATH=.tools/node_modules node eventsource_count.cjs <url> <seconds>
"use strict";
const { EventSource } = require("eventsource");

const [url, seconds] = process.argv.slice(2);
const requests = [];
const events = [];
const source = new EventSource(url, {
  fetch: async (input, init) => {
    const response = await fetch(input, init);
    const lastEventId = new Headers(init && init.headers).get("last-event-id");
    requests.push({ status: response.status, lastEventId });
    return response;
  },
});
source.addEventListener("status", (event) => {
  events.push({ id: event.lastEventId, status: JSON.parse(event.data).status });
});
source.onerror = () => {};
setTimeout(() => {
  source.close();
  console.log(JSON.stringify({ requests, events, readyState: source.readyState }));
  process.exit(0);
}, Number(seconds) * 1000);
