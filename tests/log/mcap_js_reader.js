// Reads an MCAP file with @mcap/core (the reference TypeScript implementation,
// run by Node) and prints what it sees, one tab-separated line each:
//   channel <id> <topic> <message encoding> <schema name> <schema encoding> <tether.type_id>
//   message <topic> <log time> <publish time> <sequence> <data, base64>
//   stats <message count> <channel count> <chunk count>   (indexed only)
//   done <messages>
// Usage: node mcap_js_reader.js <node_modules dir> <file> indexed|streaming
"use strict";
const fs = require("fs");
const path = require("path");
const [modules, file, mode] = process.argv.slice(2);
const { McapIndexedReader, McapStreamReader } = require(path.join(modules, "@mcap/core"));
const fzstd = require(path.join(modules, "fzstd"));

const decompressHandlers = {
  zstd: (buffer, size) => fzstd.decompress(buffer, new Uint8Array(Number(size))),
};

function printChannel(channel, schema) {
  console.log(["channel", channel.id, channel.topic, channel.messageEncoding,
               schema ? schema.name : "", schema ? schema.encoding : "",
               channel.metadata.get("tether.type_id") || ""].join("\t"));
}

function printMessage(topic, m) {
  console.log(["message", topic, m.logTime.toString(), m.publishTime.toString(),
               m.sequence, Buffer.from(m.data).toString("base64")].join("\t"));
}

async function indexed(data) {
  const readable = {
    size: async () => BigInt(data.length),
    read: async (offset, length) => data.subarray(Number(offset), Number(offset + length)),
  };
  const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
  for (const channel of reader.channelsById.values()) {
    printChannel(channel, reader.schemasById.get(channel.schemaId));
  }
  const s = reader.statistics;
  console.log(["stats", s.messageCount.toString(), s.channelCount, s.chunkCount].join("\t"));
  let n = 0;
  for await (const m of reader.readMessages()) {
    printMessage(reader.channelsById.get(m.channelId).topic, m);
    ++n;
  }
  console.log(["done", n].join("\t"));
}

function streaming(data) {
  const reader = new McapStreamReader({ decompressHandlers, validateCrcs: true });
  reader.append(data);
  const channels = new Map(), schemas = new Map();
  let n = 0, record;
  while ((record = reader.nextRecord()) !== undefined) {
    if (record.type === "Schema") schemas.set(record.id, record);
    if (record.type === "Channel" && !channels.has(record.id)) {
      channels.set(record.id, record);
      printChannel(record, schemas.get(record.schemaId));
    }
    if (record.type === "Message") {
      printMessage(channels.get(record.channelId).topic, record);
      ++n;
    }
  }
  if (!reader.done()) throw new Error("stream reader did not reach the end of the file");
  console.log(["done", n].join("\t"));
}

const data = fs.readFileSync(file);
(mode === "indexed" ? indexed(data) : Promise.resolve(streaming(data))).catch((e) => {
  console.error(String(e && e.stack || e));
  process.exit(1);
});
