// NodeGround method service in Node.js: the same proto as the Python SDK, no Python.
//
// Method "centroid": average each node's features over its neighbourhood `hops`
// times (the graph carries one self-loop per node), optionally L2-normalise the
// rows, take the mean of the training nodes of each class, and turn squared
// distances to those class centroids into probabilities with a softmax at
// `temperature` (distances are scaled by the mean within-class spread of the
// training nodes, so the temperature has no units). Honest and tiny: it only
// reads labels of the training nodes it is given.
//
//   node server.js [--host 0.0.0.0] [--port 50051]    (port 0 picks a free one)
"use strict";

const crypto = require("crypto");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const FAMILY = "centroid";
const VERSION = "2026-11-29";
const CHUNK_BYTES = 2 << 20;
const MAX_MESSAGE_BYTES = 4 << 20;
const TENSORS = [["features", "float32", 2], ["edge_index", "int64", 2], ["labels", "int64", 1]];
const ITEMSIZE = { float32: 4, int64: 8 };

const DEFAULT_CONFIG = { hops: 1, temperature: 1.0, normalize: true };
const SPACE = [
  { name: "hops", int_range: { low: 0, high: 3, log: false } },
  { name: "temperature", float_range: { low: 0.05, high: 20.0, log: true } },
  { name: "normalize", choice: { values: [{ bool_value: true }, { bool_value: false }] } },
];

const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true };
const protoRoot = process.env.NODEGROUND_PROTO_ROOT || path.join(__dirname, "..", "..", "proto");
const pkg = grpc.loadPackageDefinition(
  protoLoader.loadSync([path.join(protoRoot, "nodeground", "v1", "method_service.proto"), path.join(__dirname, "health.proto")], LOADER_OPTIONS),
);
const MethodService = pkg.nodeground.v1.MethodService.service;
const HealthService = pkg.grpc.health.v1.Health.service;

class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}
const invalid = (message) => new RpcError(grpc.status.INVALID_ARGUMENT, message);

const graphs = new Map(); // hash -> {n, f, c, x: Float32Array, src, dst: Int32Array, y: Int32Array}
const models = new Map(); // handle -> {graph, probs: Float32Array}

function graphHash(numClasses, specs, payload) {
  const h = crypto.createHash("sha256");
  h.update(`nodeground-graph-v1 num_classes=${numClasses}\n`);
  for (const s of specs) h.update(`${s.name} ${s.dtype} ${s.shape.join("x")}\n`);
  h.update(payload);
  return h.digest("hex");
}

// A little-endian int64 tensor whose values fit in int32 (node ids, labels).
function int64Column(buf, offset, count) {
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const lo = buf.readUInt32LE(offset + 8 * i);
    const hi = buf.readInt32LE(offset + 8 * i + 4);
    if (!((hi === 0 && lo < 0x80000000) || (hi === -1 && lo >= 0x80000000))) throw invalid("int64 value outside the int32 range");
    out[i] = lo | 0;
  }
  return out;
}

function decodeGraph(header, payload) {
  const names = header.tensors.map((t) => t.name);
  if (names.join(",") !== TENSORS.map((t) => t[0]).join(",")) throw invalid(`tensors must be features, edge_index, labels in that order, got ${names}`);
  let expected = 0;
  header.tensors.forEach((spec, i) => {
    const [name, dtype, ndim] = TENSORS[i];
    if (spec.dtype !== dtype || spec.shape.length !== ndim || spec.shape.some((d) => d < 0)) throw invalid(`tensor ${name}: expected ${dtype} with ${ndim} dims`);
    const size = spec.shape.reduce((a, b) => a * b, 1) * ITEMSIZE[dtype];
    if (spec.nbytes !== size || spec.offset !== expected) throw invalid(`tensor ${name}: offset/nbytes disagree with its shape`);
    expected += size;
  });
  if (header.total_bytes !== expected || payload.length !== expected) throw invalid(`upload carries ${payload.length} bytes, header announces ${header.total_bytes}, shapes need ${expected}`);
  const digest = graphHash(header.num_classes, header.tensors, payload);
  if (digest !== header.graph_hash) throw invalid(`graph hash mismatch: header says ${header.graph_hash}, content is ${digest}`);
  const [fs, es, ls] = header.tensors;
  const [n, f] = fs.shape;
  const e = es.shape[1];
  if (es.shape[0] !== 2 || ls.shape[0] !== n || n <= 0) throw invalid("inconsistent tensor shapes");
  const c = header.num_classes;
  if (c < 2) throw invalid(`num_classes must be at least 2, got ${c}`);
  const x = new Float32Array(payload.buffer.slice(payload.byteOffset + fs.offset, payload.byteOffset + fs.offset + fs.nbytes));
  if (!x.every(Number.isFinite)) throw invalid("features contain NaN or infinite values");
  const edges = int64Column(payload, es.offset, 2 * e);
  const src = edges.subarray(0, e);
  const dst = edges.subarray(e);
  for (let i = 0; i < 2 * e; i++) if (edges[i] < 0 || edges[i] >= n) throw invalid(`edge_index holds node id ${edges[i]} outside [0, ${n})`);
  const y = int64Column(payload, ls.offset, n);
  for (let i = 0; i < n; i++) if (y[i] < -1 || y[i] >= c) throw invalid(`label ${y[i]} outside [-1, ${c})`);
  return { hash: digest, n, f, c, x, src, dst, y, bytes: payload.length };
}

function valueOf(v) {
  if (!v || !v.kind) throw invalid("config value without a type");
  return v[v.kind];
}

function resolveConfig(config) {
  const merged = { ...DEFAULT_CONFIG };
  for (const [key, raw] of Object.entries(config || {})) {
    const value = valueOf(raw);
    if (key === "hops") {
      if (raw.kind !== "int_value" || value < 0 || value > 3) throw invalid(`hops must be an integer in [0, 3], got ${value}`);
      merged.hops = Number(value);
    } else if (key === "temperature") {
      if (!["float_value", "int_value"].includes(raw.kind) || !(value >= 0.05 && value <= 20)) throw invalid(`temperature must be a number in [0.05, 20], got ${value}`);
      merged.temperature = Number(value);
    } else if (key === "normalize") {
      if (raw.kind !== "bool_value") throw invalid(`normalize must be a bool, got ${value}`);
      merged.normalize = value;
    } else {
      throw invalid(`unknown config key ${JSON.stringify(key)}; known keys: hops, normalize, temperature`);
    }
  }
  return merged;
}

function nodeSet(field, ids, g) {
  if (!ids || ids.length === 0) throw invalid(`${field} is empty`);
  for (const i of ids) {
    if (i < 0 || i >= g.n) throw invalid(`${field} holds node ids outside [0, ${g.n})`);
    if (g.y[i] < 0) throw invalid(`${field} includes nodes whose label is hidden (-1)`);
  }
  return ids;
}

function fitPredict(g, train, cfg, deadline) {
  const { n, f, c } = g;
  let h = g.x;
  for (let hop = 0; hop < cfg.hops; hop++) {
    if (deadline && Date.now() > deadline) throw new RpcError(grpc.status.DEADLINE_EXCEEDED, "centroid: the fit ran past its time limit");
    const sum = new Float64Array(n * f);
    const deg = new Float64Array(n);
    for (let k = 0; k < g.src.length; k++) {
      const s = g.src[k];
      const t = g.dst[k];
      deg[t] += 1;
      for (let j = 0; j < f; j++) sum[t * f + j] += h[s * f + j];
    }
    const next = new Float32Array(n * f);
    for (let i = 0; i < n; i++) for (let j = 0; j < f; j++) next[i * f + j] = deg[i] > 0 ? sum[i * f + j] / deg[i] : h[i * f + j];
    h = next;
  }
  if (cfg.normalize) {
    const out = new Float32Array(n * f);
    for (let i = 0; i < n; i++) {
      let norm = 0;
      for (let j = 0; j < f; j++) norm += h[i * f + j] ** 2;
      norm = Math.sqrt(norm) || 1;
      for (let j = 0; j < f; j++) out[i * f + j] = h[i * f + j] / norm;
    }
    h = out;
  }
  if (deadline && Date.now() > deadline) throw new RpcError(grpc.status.DEADLINE_EXCEEDED, "centroid: the fit ran past its time limit");
  const centroid = new Float64Array(c * f);
  const count = new Float64Array(c);
  for (const i of train) {
    count[g.y[i]] += 1;
    for (let j = 0; j < f; j++) centroid[g.y[i] * f + j] += h[i * f + j];
  }
  for (let k = 0; k < c; k++) if (count[k] > 0) for (let j = 0; j < f; j++) centroid[k * f + j] /= count[k];
  const dist = (i, k) => {
    let d = 0;
    for (let j = 0; j < f; j++) d += (h[i * f + j] - centroid[k * f + j]) ** 2;
    return d;
  };
  let spread = 0;
  for (const i of train) spread += dist(i, g.y[i]);
  spread = spread / train.length || 1;
  const scale = 1 / (cfg.temperature * spread);
  const probs = new Float32Array(n * c);
  const logits = new Float64Array(c);
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    for (let k = 0; k < c; k++) {
      logits[k] = count[k] > 0 ? -dist(i, k) * scale : -Infinity; // a class without training nodes gets probability 0
      if (logits[k] > best) best = logits[k];
    }
    let total = 0;
    for (let k = 0; k < c; k++) total += logits[k] = Math.exp(logits[k] - best);
    for (let k = 0; k < c; k++) probs[i * c + k] = logits[k] / total;
  }
  return probs;
}

function stats(startNs) {
  return {
    seconds: Number(process.hrtime.bigint() - startNs) / 1e9,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    peak_gpu_bytes: 0,
  };
}

function unary(fn) {
  return (call, callback) => {
    try {
      callback(null, fn(call));
    } catch (err) {
      if (err instanceof RpcError) callback({ code: err.code, details: err.message });
      else callback({ code: grpc.status.INTERNAL, details: `centroid failed: ${err && err.stack ? err.stack.split("\n")[0] : err}` });
    }
  };
}

function callDeadline(call) {
  const d = call.getDeadline();
  if (d instanceof Date) return d.getTime();
  return typeof d === "number" && Number.isFinite(d) ? d : null;
}

const service = {
  Describe: unary(() => ({
    family: FAMILY,
    device: "cpu",
    methods: [
      {
        name: "centroid",
        version: VERSION,
        family: FAMILY,
        kind: "METHOD_KIND_SUPERVISED",
        description: "Nearest class centroid on neighbour-averaged features (Node.js).",
        capabilities: { uses_gpu: false, needs_gpu: false, supports_binary: true, supports_multiclass: true },
        default_config: { hops: { int_value: 1 }, temperature: { float_value: 1.0 }, normalize: { bool_value: true } },
        search_space: SPACE,
        library_versions: {
          node: process.versions.node,
          "@grpc/grpc-js": require("@grpc/grpc-js/package.json").version,
          "@grpc/proto-loader": require("@grpc/proto-loader/package.json").version,
        },
      },
    ],
  })),

  HasGraph: unary((call) => ({ held: graphs.has(call.request.graph_hash) })),

  UploadGraph(call, callback) {
    const start = process.hrtime.bigint();
    let header = null;
    let skip = false;
    const parts = [];
    let size = 0;
    let failed = false;
    const fail = (code, details) => {
      if (!failed) callback({ code, details });
      failed = true;
    };
    call.on("data", (chunk) => {
      if (failed) return;
      if (header === null) {
        if (!chunk.header) return fail(grpc.status.INVALID_ARGUMENT, "the first chunk must carry the graph header");
        header = chunk.header;
        skip = graphs.has(header.graph_hash);
      }
      if (skip) return;
      size += chunk.data.length;
      if (size > header.total_bytes) return fail(grpc.status.INVALID_ARGUMENT, `upload carries more than the announced ${header.total_bytes} bytes`);
      parts.push(chunk.data);
    });
    call.on("end", () => {
      if (failed) return;
      if (header === null) return fail(grpc.status.INVALID_ARGUMENT, "the first chunk must carry the graph header");
      if (skip) return callback(null, { graph_hash: header.graph_hash, already_held: true, service_seconds: 0 });
      try {
        const g = decodeGraph(header, Buffer.concat(parts, size));
        graphs.set(g.hash, g);
        while (graphs.size > 8) graphs.delete(graphs.keys().next().value); // oldest first
        callback(null, { graph_hash: g.hash, already_held: false, service_seconds: Number(process.hrtime.bigint() - start) / 1e9 });
      } catch (err) {
        fail(err.code || grpc.status.INTERNAL, err.message);
      }
    });
    call.on("error", () => {
      failed = true;
    });
  },

  Fit: unary((call) => {
    const start = process.hrtime.bigint();
    const r = call.request;
    if (r.method !== "centroid") throw invalid(`unknown method ${JSON.stringify(r.method)}; this centroid service hosts centroid`);
    const g = graphs.get(r.graph_hash);
    if (!g) throw new RpcError(grpc.status.NOT_FOUND, `graph ${r.graph_hash} is not held; upload it first`);
    const train = nodeSet("train_nodes", r.train_nodes, g);
    nodeSet("val_nodes", r.val_nodes, g);
    const cfg = resolveConfig(r.config);
    let deadline = r.time_limit_seconds > 0 ? Date.now() + 1000 * r.time_limit_seconds : null;
    const grpcDeadline = callDeadline(call);
    if (grpcDeadline !== null) deadline = deadline === null ? grpcDeadline : Math.min(deadline, grpcDeadline);
    const probs = fitPredict(g, train, cfg, deadline);
    const handle = crypto.randomBytes(16).toString("hex");
    models.set(handle, { graph: g, probs });
    return { model_handle: handle, stats: stats(start), info: { hops: { int_value: cfg.hops } } };
  }),

  Predict(call) {
    const start = process.hrtime.bigint();
    const model = models.get(call.request.model_handle);
    if (!model) {
      call.emit("error", { code: grpc.status.NOT_FOUND, details: `no model with handle ${JSON.stringify(call.request.model_handle)} (released or never fitted)` });
      return;
    }
    const { n, c } = model.graph;
    const rows = Math.max(1, Math.floor(CHUNK_BYTES / (4 * c)));
    const bytes = Buffer.from(model.probs.buffer, model.probs.byteOffset, model.probs.byteLength);
    for (let offset = 0; offset < n; offset += rows) {
      const count = Math.min(rows, n - offset);
      const chunk = { row_offset: offset, num_rows: count, num_classes: c, probabilities: bytes.subarray(offset * c * 4, (offset + count) * c * 4) };
      if (offset + rows >= n) chunk.stats = stats(start);
      call.write(chunk);
    }
    call.end();
  },

  Release: unary((call) => ({ released: models.delete(call.request.model_handle) })),
};

const SERVING = "SERVING";
const health = {
  Check: unary((call) => {
    const name = call.request.service;
    if (name && name !== "nodeground.v1.MethodService") throw new RpcError(grpc.status.NOT_FOUND, `unknown service ${name}`);
    return { status: SERVING };
  }),
  Watch(call) {
    call.write({ status: SERVING });
  },
};

function main() {
  const args = process.argv.slice(2);
  const opt = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
  };
  const host = opt("--host", "0.0.0.0");
  const port = opt("--port", process.env.PORT || "50051");
  const server = new grpc.Server({ "grpc.max_receive_message_length": MAX_MESSAGE_BYTES, "grpc.max_send_message_length": MAX_MESSAGE_BYTES });
  server.addService(MethodService, service);
  server.addService(HealthService, health);
  server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => {
    if (err) {
      console.error(`error: could not bind ${host}:${port}: ${err.message}`);
      process.exit(2);
    }
    console.log(`NODEGROUND_LISTENING ${bound}`);
  });
  const stop = () => server.tryShutdown(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (require.main === module) main();
module.exports = { fitPredict, graphHash, resolveConfig };
