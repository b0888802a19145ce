#!/usr/bin/env node
// kafkajs 2.2.4 driver for kbroker's Python integration tests (tests/integration/harness.py:run_kafkajs).
//
// Usage: node kafkajs_roundtrip.js '<json spec>'   -> prints ONE line of JSON on stdout; kafkajs logs go to stderr.
//
// Spec fields (bytes are base64 strings, null stays null):
//   brokers      ["127.0.0.1:9092"]                 (required)
//   topic        "t"                                (required)
//   mode         "produce" | "consume" | "fetch"    (required)
//   clientId     default "kbroker-kafkajs"
//   logLevel     "nothing" | "error" | "warn" | "info" | "debug"   default "warn"
//   timeoutMs    overall deadline for consume/fetch, default 30000
//   createTopic  {numPartitions, replicationFactor, configs: {name: value}} -> admin.createTopics first
//                (waits for leaders; an existing topic is fine); result gains "created": true|false
//   allowAutoTopicCreation  for producer/consumer/fetch metadata requests, default false
//   ssl          {ca, cert, key: PEM file paths, passphrase, servername, rejectUnauthorized (default true)}
//                -> kafkajs's `ssl` (Node's tls.connect options; files read here), default none (plaintext)
//   sasl         {mechanism, username, password}  kafkajs's SASL options (SASL_PLAINTEXT), default none
// produce:
//   messages     [{key, value, headers: {name: b64 | [b64, ...]}, partition, timestamp}]
//                or `count` alone: count messages with key null and value "message-<i>"
//   compression  "none" | "gzip"                    default "none"
//   acks         -1 | 0 | 1                          default -1
//   idempotent   bool                               default false
//   -> {"mode":"produce","results":[{topicName, partition, errorCode, baseOffset, ...}],
//       "offsets":{"<partition>": <baseOffset>}}   (results as kafkajs returns them, offsets as numbers)
// consume (a consumer GROUP: needs FindCoordinator/JoinGroup/SyncGroup/Heartbeat/OffsetCommit in the broker):
//   count (required), fromBeginning (default true), groupId (default unique per run)
// fetch (NO group: kafkajs's internal cluster/broker objects send ListOffsets and Fetch directly):
//   count (required), fromBeginning (default true) or offsets {"<partition>": <offset>}, partitions [ints]
//   (default: every partition), maxWaitTimeMs per Fetch (default 200)
//   -> {"mode":..,"records":[{partition, offset, key, value, headers, timestamp}]}
//      records sorted by (partition, offset); offset/timestamp as numbers; control records skipped.
// Exit codes: 0 ok; 2 deadline passed before `count` records (JSON still printed, with "error":"timeout");
// 1 any other error (JSON {"error": message} on stdout, stack on stderr).
'use strict'

const { Kafka, CompressionTypes, Partitioners, logLevel: LEVELS } = require('kafkajs')

const spec = JSON.parse(process.argv[2] || '{}')

const fromB64 = s => (s === null || s === undefined ? s : Buffer.from(s, 'base64'))
const toB64 = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))

// kafkajs's default logger writes to stdout, which carries our JSON result: log to stderr instead.
const stderrLogCreator = () => ({ namespace, level, label, log }) => {
  process.stderr.write(`${label} [${namespace}] ${log.message} ${JSON.stringify(log)}\n`)
}

// spec.ssl -> Node tls.connect options: the PEM files are read here, so the spec carries paths only.
function sslOptions (s) {
  if (!s) return undefined
  const fs = require('fs')
  const out = { rejectUnauthorized: s.rejectUnauthorized !== false }
  for (const field of ['ca', 'cert', 'key']) {
    if (s[field]) out[field] = [fs.readFileSync(s[field], 'utf-8')]
  }
  if (out.cert) out.cert = out.cert[0]
  if (out.key) out.key = out.key[0]
  if (s.passphrase) out.passphrase = s.passphrase
  if (s.servername) out.servername = s.servername
  return out
}

function makeKafka () {
  for (const field of ['brokers', 'topic', 'mode']) {
    if (!spec[field]) throw new Error(`spec.${field} is required`)
  }
  const level = LEVELS[(spec.logLevel || 'warn').toUpperCase()]
  return new Kafka({
    clientId: spec.clientId || 'kbroker-kafkajs',
    brokers: spec.brokers,
    logLevel: level === undefined ? LEVELS.WARN : level,
    logCreator: stderrLogCreator,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    ssl: sslOptions(spec.ssl),
    retry: { retries: spec.retries === undefined ? 5 : spec.retries, initialRetryTime: 100 },
    sasl: spec.sasl // {mechanism: "plain" | "scram-sha-256" | "scram-sha-512", username, password} or undefined
  })
}

function decodeHeaders (headers) {
  const out = {}
  for (const [name, value] of Object.entries(headers || {})) {
    out[name] = Array.isArray(value) ? value.map(toB64) : toB64(value)
  }
  return out
}

function encodeHeaders (headers) {
  if (!headers) return undefined
  const out = {}
  for (const [name, value] of Object.entries(headers)) {
    out[name] = Array.isArray(value) ? value.map(fromB64) : fromB64(value)
  }
  return out
}

function recordOf (partition, message) {
  return {
    partition,
    offset: Number(message.offset),
    key: toB64(message.key),
    value: toB64(message.value),
    headers: decodeHeaders(message.headers),
    timestamp: Number(message.timestamp)
  }
}

function sortRecords (records) {
  return records.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
}

async function produce (kafka) {
  let messages
  if (spec.messages) {
    messages = spec.messages.map(m => ({
      key: fromB64(m.key),
      value: fromB64(m.value),
      headers: encodeHeaders(m.headers),
      partition: m.partition,
      timestamp: m.timestamp === undefined ? undefined : String(m.timestamp)
    }))
  } else {
    messages = Array.from({ length: spec.count || 0 }, (_, i) => ({ key: null, value: `message-${i}` }))
  }
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner, // Java-compatible murmur2, as in kafkajs 2.x's default
    idempotent: !!spec.idempotent,
    allowAutoTopicCreation: !!spec.allowAutoTopicCreation
  })
  await producer.connect()
  try {
    const results = await producer.send({
      topic: spec.topic,
      messages,
      acks: spec.acks === undefined ? -1 : spec.acks,
      compression: spec.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None
    })
    const offsets = {}
    for (const r of results) offsets[r.partition] = Number(r.baseOffset)
    return { mode: 'produce', results, offsets }
  } finally {
    await producer.disconnect()
  }
}

async function consume (kafka, deadline) {
  const records = []
  const groupId = spec.groupId || `kbroker-kafkajs-${process.pid}-${Date.now()}`
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200, allowAutoTopicCreation: !!spec.allowAutoTopicCreation })
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [spec.topic], fromBeginning: spec.fromBeginning !== false })
    let resolveDone, rejectDone
    const done = new Promise((resolve, reject) => { resolveDone = resolve; rejectDone = reject })
    // kafkajs emits CRASH once its own retries are spent (e.g. no group coordinator): fail now, not at timeoutMs.
    consumer.on(consumer.events.CRASH, event => rejectDone(event.payload.error))
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        records.push(recordOf(partition, message))
        if (records.length >= spec.count) resolveDone(true)
      }
    })
    const finished = await Promise.race([done, sleep(deadline - Date.now()).then(() => false)])
    return { mode: 'consume', groupId, records: sortRecords(records), timedOut: !finished }
  } finally {
    await consumer.disconnect()
  }
}

// Group-less fetch through kafkajs internals (pinned to 2.2.4): Kafka's private createCluster, then
// Cluster.fetchTopicsOffset (ListOffsets) and Broker.fetch (Fetch) against each partition's leader.
async function fetch (kafka, deadline) {
  const createSym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!createSym) throw new Error('kafkajs internals changed: no private createCluster (is kafkajs 2.2.4 installed?)')
  const cluster = kafka[createSym]({ allowAutoTopicCreation: !!spec.allowAutoTopicCreation })
  await cluster.connect()
  try {
    await cluster.addTargetTopic(spec.topic)
    const partitions = spec.partitions ||
      cluster.findTopicPartitionMetadata(spec.topic).map(p => p.partitionId).sort((a, b) => a - b)
    const position = {}
    if (spec.offsets) {
      for (const p of partitions) position[p] = Number(spec.offsets[p] || 0)
    } else {
      const listed = await cluster.fetchTopicsOffset([{
        topic: spec.topic,
        fromBeginning: spec.fromBeginning !== false,
        partitions: partitions.map(partition => ({ partition }))
      }])
      for (const p of listed[0].partitions) position[p.partition] = Number(p.offset)
    }
    const records = []
    while (records.length < spec.count && Date.now() < deadline) {
      const byLeader = cluster.findLeaderForPartitions(spec.topic, partitions)
      for (const [nodeId, leaderPartitions] of Object.entries(byLeader)) {
        const broker = await cluster.findBroker({ nodeId })
        const response = await broker.fetch({
          replicaId: -1,
          isolationLevel: 0,
          maxWaitTime: spec.maxWaitTimeMs === undefined ? 200 : spec.maxWaitTimeMs,
          minBytes: 1,
          maxBytes: 10485760,
          topics: [{
            topic: spec.topic,
            partitions: leaderPartitions.map(partition => ({
              partition, fetchOffset: String(position[partition]), maxBytes: 1048576
            }))
          }]
        })
        for (const topicResponse of response.responses) {
          for (const p of topicResponse.partitions) {
            if (p.errorCode) throw new Error(`fetch ${spec.topic}-${p.partition}: error code ${p.errorCode}`)
            for (const m of p.messages) {
              // A batch may start before the requested offset; control records are not user data.
              if (Number(m.offset) < position[p.partition] || m.isControlRecord) continue
              records.push(recordOf(p.partition, m))
              position[p.partition] = Number(m.offset) + 1
            }
          }
        }
      }
    }
    return { mode: 'fetch', records: sortRecords(records), timedOut: records.length < spec.count }
  } finally {
    await cluster.disconnect()
  }
}

function sleep (ms) {
  return new Promise(resolve => setTimeout(resolve, Math.max(0, ms)))
}

async function createTopic (kafka) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const t = spec.createTopic
    return await admin.createTopics({
      waitForLeaders: true,
      topics: [{
        topic: spec.topic,
        numPartitions: t.numPartitions || 1,
        replicationFactor: t.replicationFactor || 1,
        configEntries: Object.entries(t.configs || {}).map(([name, value]) => ({ name, value: String(value) }))
      }]
    })
  } finally {
    await admin.disconnect()
  }
}

async function main () {
  const kafka = makeKafka()
  const deadline = Date.now() + (spec.timeoutMs || 30000)
  const created = spec.createTopic ? await createTopic(kafka) : undefined
  let result
  if (spec.mode === 'produce') result = await produce(kafka)
  else if (spec.mode === 'consume') result = await consume(kafka, deadline)
  else if (spec.mode === 'fetch') result = await fetch(kafka, deadline)
  else throw new Error(`unknown mode ${JSON.stringify(spec.mode)}`)
  if (created !== undefined) result.created = created
  if (result.timedOut) result.error = 'timeout'
  process.stdout.write(JSON.stringify(result) + '\n')
  return result.timedOut ? 2 : 0
}

main().then(
  code => process.exit(code),
  err => {
    process.stdout.write(JSON.stringify({ mode: spec.mode, error: String(err && err.message ? err.message : err) }) + '\n')
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  }
)
