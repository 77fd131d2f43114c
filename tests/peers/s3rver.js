// Starts @20minutes/s3rver (an S3 server in Node that checks SigV4 signatures; credentials S3RVER /
// S3RVER) on 127.0.0.1:PORT with the bucket anneal-test, storing under DIR; prints "ready".
// Run with node --openssl-legacy-provider (Node 20; PEERS.md). Usage: node s3rver.js PORT DIR
const S3rver = require('@20minutes/s3rver');
const [port, dir] = process.argv.slice(2);
new S3rver({ port: Number(port), address: '127.0.0.1', directory: dir, silent: true,
             configureBuckets: [{ name: 'anneal-test' }] }).run().then(() => console.log('ready'));
