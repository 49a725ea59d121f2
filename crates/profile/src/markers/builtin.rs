//! The built-in marker rule sets, one per client, written from the log calls in each
//! client's source (cited next to each rule) and checked against real lines (the tests
//! cite where each came from). Every client prints its fields three ways (a terminal
//! format, logfmt and JSON), so a field is looked for as `key=value`, `key="value"` or
//! `"key":value`. Where one client's versions order a line's fields differently, the set
//! holds one rule per order, under the same marker name: the first that matches wins.
//!
//! A set is chosen when one of its hints is part of the target's image, container or
//! compose service name (`op-reth` and `op-geth` are reth and geth); a container that
//! names no client gets every set (their messages are specific enough not to collide).

use super::rules::Rule;

/// A built-in rule set.
#[derive(Debug)]
pub struct BuiltinSet {
    pub name: &'static str,
    pub client: &'static str,
    /// Substrings of an image, container or service name that choose this set.
    pub hints: &'static [&'static str],
    /// (marker name, regex, where the line is logged)
    pub rules: &'static [(&'static str, &'static str, &'static str)],
}

/// A Go or Rust duration: `2.877896ms`, `51.146µs`, `2m22.439s`.
macro_rules! dur {
    () => {
        r"\d[\d.]*(?:h\d[\d.]*)?(?:m\d[\d.]*)?(?:ns|us|µs|μs|ms|s|m|h)"
    };
}
/// `key=`, `key="`, `"key":"` and `"key":` before a value.
macro_rules! kv {
    ($key:literal) => {
        concat!(r"\b", $key, r#""?[=:]\s*"?"#)
    };
}
/// A full or abbreviated hash: `0x2ccd…`, `cbe511..2a7490`, `ec64dc…ab857a`.
macro_rules! hash {
    () => {
        r"(?P<hash>(?:0x)?[0-9a-fA-F]+(?:(?:\.\.|…)[0-9a-fA-F]+)?)"
    };
}

pub const SETS: &[BuiltinSet] = &[
    BuiltinSet {
        name: "reth",
        client: "reth, op-reth",
        hints: &["reth"],
        rules: &[
            (
                "block",
                concat!(
                    r"Block added to canonical chain\b.*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+).*?",
                    kv!("hash"),
                    hash!(),
                    r"(?:.*?",
                    kv!("elapsed"),
                    "(?P<elapsed>",
                    dur!(),
                    "))?"
                ),
                "paradigmxyz/reth crates/node/events/src/node.rs (ConsensusEngineEvent::CanonicalBlockAdded)",
            ),
            (
                "committed",
                concat!(
                    r"Canonical chain committed\b.*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+)(?:.*?",
                    kv!("hash"),
                    hash!(),
                    ")?(?:.*?",
                    kv!("elapsed"),
                    "(?P<elapsed>",
                    dur!(),
                    "))?"
                ),
                "paradigmxyz/reth crates/node/events/src/node.rs (ConsensusEngineEvent::CanonicalChainCommitted)",
            ),
            (
                "fork_block",
                concat!(
                    r"Block added to fork chain\b.*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+)(?:.*?",
                    kv!("elapsed"),
                    "(?P<elapsed>",
                    dur!(),
                    "))?"
                ),
                "paradigmxyz/reth crates/node/events/src/node.rs (ConsensusEngineEvent::ForkBlockAdded)",
            ),
            (
                "payload",
                concat!(
                    r"Received new payload from consensus engine\b.*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+)"
                ),
                "paradigmxyz/reth crates/node/events/src/node.rs (ConsensusEngineEvent::BlockReceived)",
            ),
        ],
    },
    BuiltinSet {
        name: "geth",
        client: "geth, op-geth",
        hints: &["geth", "go-ethereum", "client-go"],
        rules: &[
            (
                "block",
                concat!(
                    r"Imported new (?:potential )?chain segment\b.*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+).*?",
                    kv!("hash"),
                    hash!(),
                    ".*?",
                    kv!("elapsed"),
                    "(?P<elapsed>",
                    dur!(),
                    ")"
                ),
                "ethereum/go-ethereum core/blockchain_insert.go (insertStats.report, number first since v1.10.25)",
            ),
            (
                "block",
                concat!(
                    r"Imported new (?:potential )?chain segment\b.*?",
                    kv!("elapsed"),
                    "(?P<elapsed>",
                    dur!(),
                    ").*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+)(?:.*?",
                    kv!("hash"),
                    hash!(),
                    ")?"
                ),
                "ethereum/go-ethereum core/blockchain_insert.go (insertStats.report, before v1.10.25)",
            ),
            (
                "head",
                concat!(
                    r"Chain head was updated\b.*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+).*?",
                    kv!("hash"),
                    hash!(),
                    "(?:.*?",
                    kv!("elapsed"),
                    "(?P<elapsed>",
                    dur!(),
                    "))?"
                ),
                "ethereum/go-ethereum core/blockchain.go (BlockChain.SetCanonical)",
            ),
        ],
    },
    BuiltinSet {
        name: "op-node",
        client: "op-node",
        hints: &["op-node", "opnode"],
        rules: &[
            (
                "block",
                concat!(
                    r"Inserted new L2 unsafe block\b.*?",
                    kv!("hash"),
                    hash!(),
                    ".*?",
                    kv!("number"),
                    r"(?P<number>[\d,]+)(?:.*?",
                    kv!("total_time"),
                    "(?P<elapsed>",
                    dur!(),
                    "))?"
                ),
                "ethereum-optimism/optimism op-node/rollup/engine/payload_success.go and engine_controller.go (total_time: build + insert, or newPayload + forkchoiceUpdated)",
            ),
            (
                "payload_received",
                r"Received signed execution payload from p2p\b.*?\bid=(?P<hash>(?:0x)?[0-9a-fA-F]+(?:(?:\.\.|…)[0-9a-fA-F]+)?):(?P<number>[\d,]+)",
                "ethereum-optimism/optimism op-node/p2p (gossip of unsafe payloads)",
            ),
        ],
    },
    BuiltinSet {
        name: "besu",
        client: "Besu",
        hints: &["besu"],
        rules: &[
            (
                "block",
                r"Imported #(?P<number>[\d,]+) +\((?P<hash>[0-9a-fA-Fx.]+)\)\|.*?\| *(?P<elapsed>[\d.]+m?s) exec\b",
                "hyperledger/besu ethereum/api/.../engine/AbstractEngineNewPayload.java (logImportedBlockInfo, 25.5 on)",
            ),
            (
                "block",
                r"Imported #(?P<number>[\d,]+) +\((?P<hash>[0-9a-fA-Fx.]+)\)\|.*?exec time (?P<elapsed>[\d.]+m?s)",
                "hyperledger/besu ethereum/api/.../engine/AbstractEngineNewPayload.java (logImportedBlockInfo, early 2025)",
            ),
            (
                "block",
                r"Imported #(?P<number>[\d,]+) / .*?\((?P<hash>0x[0-9a-fA-F]+)\) in (?P<elapsed>[\d.]+m?s)",
                "hyperledger/besu ethereum/api/.../engine/EngineNewPayload.java (logImportedBlockInfo, 2022 to 2024)",
            ),
        ],
    },
    BuiltinSet {
        name: "lodestar",
        client: "Lodestar",
        hints: &["lodestar"],
        rules: &[(
            "slot",
            r"\b(?:Synced|Syncing|Searching peers)\b.*? - slot: (?P<slot>\d+)(?:.*? - head: (?:\(slot -\d+\) |\d+ )?(?P<hash>0x[0-9a-fA-F]+(?:…[0-9a-fA-F]+)?))?(?:.*? - exec-block: \w+\((?P<number>\d+))?",
            "ChainSafe/lodestar packages/beacon-node/src/node/notifier.ts (runNodeNotifier, once per slot)",
        )],
    },
];

/// A set by name.
pub fn find(name: &str) -> Option<&'static BuiltinSet> {
    SETS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The sets whose hints appear in any of `names` (image, container, service); every set
/// when none does.
pub fn select(names: &[&str]) -> Vec<&'static BuiltinSet> {
    let names: Vec<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
    let chosen: Vec<&BuiltinSet> = SETS
        .iter()
        .filter(|s| s.hints.iter().any(|h| names.iter().any(|n| n.contains(h))))
        .collect();
    if chosen.is_empty() {
        SETS.iter().collect()
    } else {
        chosen
    }
}

/// A set's rules, compiled. The patterns are this file's own: they compile (a test says so).
pub fn compile(set: &BuiltinSet) -> Vec<Rule> {
    set.rules
        .iter()
        .filter_map(|(name, pattern, _)| Rule::new(set.name, name, pattern).ok())
        .collect()
}

/// `--mark help`.
pub fn help_text() -> String {
    let mut out = String::from(
        "Marker rules: --mark NAME=REGEX (repeatable), --mark @FILE (one NAME=REGEX per line, # comments),\n\
         --mark SET (a built-in set below), --mark auto (the default: sets chosen from the image,\n\
         container and service names; every set when none matches), --mark off (no built-in set).\n\
         Named groups: number, elapsed or duration (ns, us/µs, ms, s, Go's 1m2.3s), hash, slot.\n\n\
         Built-in sets:\n",
    );
    for set in SETS {
        out.push_str(&format!(
            "\n{} ({}) — chosen for names containing {}\n",
            set.name,
            set.client,
            set.hints.join(", ")
        ));
        for (name, pattern, source) in set.rules {
            out.push_str(&format!("  {name}: {pattern}\n    from {source}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::rules::Matcher;
    use super::*;

    /// (marker name, number or slot, elapsed ns, hash) of the marker `set` makes of `line`.
    fn read(set: &str, line: &str) -> (String, Option<u64>, Option<u64>, Option<String>) {
        let m = Matcher::new(compile(find(set).unwrap()))
            .marker(0, line)
            .unwrap_or_else(|| panic!("{set} matched nothing in: {line}"));
        (m.name, m.number.or(m.slot), m.elapsed_ns, m.hash)
    }

    fn check(set: &str, line: &str, name: &str, number: u64, elapsed: Option<u64>, hash: &str) {
        let got = read(set, line);
        assert_eq!(
            (got.0.as_str(), got.1, got.2),
            (name, Some(number), elapsed),
            "{line}"
        );
        let h = got.3.unwrap_or_default();
        assert!(h.starts_with(hash), "hash {h} of {line}");
    }

    #[test]
    fn every_builtin_pattern_compiles() {
        for set in SETS {
            assert_eq!(compile(set).len(), set.rules.len(), "{}", set.name);
        }
    }

    #[test]
    fn reth_lines() {
        // Reth v1.1.0, quoted in paradigmxyz/reth issue #4635.
        check("reth", "2024-10-20T07:20:01.882322Z  INFO Block added to canonical chain number=21005256 hash=0x0b6a0a4dc41068d6beeb776442ee6237f9e303579539a04ed0d469e6ec63d31a peers=130 txs=173 gas=14.62 Mgas gas_throughput=55.15 Mgas/second full=48.7% base_fee=7.66gwei blobs=1 excess_blobs=0 elapsed=265.119402ms",
            "block", 21005256, Some(265_119_402), "0x0b6a0a4d");
        check("reth", "2024-10-20T07:20:02.012835Z  INFO Canonical chain committed number=21005256 hash=0x0b6a0a4dc41068d6beeb776442ee6237f9e303579539a04ed0d469e6ec63d31a elapsed=364.53µs",
            "committed", 21005256, Some(364_530), "0x0b6a");
        // The line the issue starts from (a nanoreth node's journal).
        check("reth", "2025-09-30T05:38:09.557031Z  INFO Block added to canonical chain number=15207178 hash=0x2ccd43d458ee20aa22eb34757f8c7f463d19c2a574d7087bf2801706b3ff2349 peers=1 txs=6 gas_used=1.16Mgas gas_throughput=402.41Mgas/second gas_limit=2.00Mgas full=57.9% base_fee=0.52Gwei blobs=0 excess_blobs=0 elapsed=2.877896ms",
            "block", 15207178, Some(2_877_896), "0x2ccd43d4");
        // op-reth with --log.stdout.format log-fmt, quoted in paradigmxyz/reth issue #16666.
        check(
            "reth",
            r#"Jun 05 08:53:49 rockx-mainnet-opt-full-01 sh[358966]: ts=2025-06-05T08:53:49.477096009Z level=info target=reth_node_events::node message="Block added to canonical chain" number=136735642 hash=0xd2ac6a669dab10f2d08ae3320c6c8fde0c69ba8f25adc7a5479de2cd4ef712a8 peers=49 txs=1 gas="46.17 Kgas" gas_throughput="7.10 Ggas/second" full=0.1% base_fee=0.00gwei blobs=0 excess_blobs=0 elapsed=6.505µs"#,
            "block",
            136735642,
            Some(6_505),
            "0xd2ac6a66",
        );
        // Not a canonical block: another rule or none.
        assert!(Matcher::new(compile(find("reth").unwrap()))
            .marker(
                0,
                "INFO Forkchoice updated head_block_hash=0x7f9f131 safe_block_hash=0x1"
            )
            .is_none());
    }

    #[test]
    fn geth_lines() {
        // The issue's own example: numbers with thousands separators.
        check("geth", "INFO [06-10|12:00:00.000] Imported new potential chain segment number=3,609,949 hash=5a1b2c..3d4e5f blocks=1 txs=12 mgas=1.234 elapsed=63.766ms mgasps=19.35",
            "block", 3_609_949, Some(63_766_000), "5a1b2c..3d4e5f");
        // go-ethereum PR #25768 (the order since v1.10.25).
        check("geth", "INFO [09-15|15:43:12.807] Imported new potential chain segment     number=15,539,464 hash=cbe511..2a7490 blocks=1  txs=145  mgas=7.354  elapsed=25.708ms ",
            "block", 15_539_464, Some(25_708_000), "cbe511..2a7490");
        check("geth", "INFO [09-15|15:43:12.890] Chain head was updated                   number=15,539,464 hash=cbe511..2a7490 root=48b1be..5409df elapsed=2.668276ms",
            "head", 15_539_464, Some(2_668_276), "cbe511");
        // go-ethereum issue #15437 (older order, Go's minutes).
        check("geth", "INFO [11-07|04:02:00] Imported new chain segment               blocks=4  txs=42  mgas=1.838 elapsed=2m22.439s mgasps=0.013 number=2429456 hash=ec64dc…ab857a",
            "block", 2_429_456, Some(142_439_000_000), "ec64dc…ab857a");
        // op-geth, quoted in mantle-xyz/mantle-v2 issue #205 (µ makes the value quoted).
        check(
            "geth",
            r#"INFO [03-13|14:29:18.782] Chain head was updated                   number=76,858,522 hash=da0d3f..e5428c root=7d7fae..a632f1 elapsed="225.207µs""#,
            "head",
            76_858_522,
            Some(225_207),
            "da0d3f",
        );
        // A geth fork in logfmt, quoted in bnb-chain/bsc issue #3548.
        check(
            "geth",
            r#"t=02-08|10:44:22.408 lvl=info msg="Imported new chain segment" number=80004141 hash=0xf8c1080c18be08523205ef2f704f291f8f6a6948a6e591c0d9ba84b6ef855a99 miner=0x38944092685a336CB6B9ea58836436709a2adC89 blocks=1 txs=72 blobs=0 mgas=10.352535 elapsed=35.441ms mgasps=292.1004401143783 BAL=false triediffs="140.04 MiB" triedirty="253.81 MiB" trieimutabledirty="0.00 B""#,
            "block",
            80_004_141,
            Some(35_441_000),
            "0xf8c1080c",
        );
    }

    #[test]
    fn op_node_lines() {
        // logfmt, quoted in ethereum-optimism/optimism issue #16284.
        check(
            "op-node",
            r#"t=2025-06-04T18:29:14+0000 lvl=info msg="Inserted new L2 unsafe block" hash=0x1ae011189eb33430aecdfb56537d8926da93d18f87437a6213f4154ac349bb65 number=34040 state_root=0xc8d34452551ffbfa8ca2da00d1a4d52627802f41dd457be3332f2d119de224eb timestamp=1749019004 parent=0x20ca5c57f7468a97abfc6af82c753bf25c19190411dfc1a6e270984ab9baede9 prev_randao=0x45308083711a353915f5c718213fb28354f1ef3c13c665eb8f92134073c41aa8 fee_recipient=0x4200000000000000000000000000000000000011 txs=1 build_time=20.218ms insert_time=35.817ms total_time=56.035ms mgas=0.051696 mgasps=0.9225517815112707"#,
            "block",
            34040,
            Some(56_035_000),
            "0x1ae01118",
        );
        // The synchronous path, logfmt, quoted in ethereum-optimism/op-geth issue #778.
        check(
            "op-node",
            r#"t=2026-03-18T01:44:45+0000 lvl=info msg="Inserted new L2 unsafe block (synchronous)" hash=0xef99c8328358fab7aa7674401983c099bd4d97c9a74eff43ccb2e381095412ec number=43504469 newpayload_time=101.670ms fcu2_time=9.794ms total_time=111.466ms mgas=52.738684 mgasps=473.13598877679794"#,
            "block",
            43_504_469,
            Some(111_466_000),
            "0xef99c832",
        );
        // JSON, quoted in base/node issue #563.
        check(
            "op-node",
            r#"{"t":"2025-10-03T01:57:43.317508453Z","lvl":"info","msg":"Inserted new L2 unsafe block (synchronous)","hash":"0xd57de13efcd7f81e0d74d4c99dac7e946a451bb0b3d6f92ddbb7b36e7abe9155","number":36333658,"newpayload_time":"11.906ms","fcu2_time":"627.296µs","total_time":"12.534ms","mgas":52.693359,"mgasps":4203.709766743683}"#,
            "block",
            36_333_658,
            Some(12_534_000),
            "0xd57de13e",
        );
        // Terminal format, quoted in celo-org/optimism issue #372.
        check(
            "op-node",
            r#"INFO [03-27|10:44:21.879] Inserted new L2 unsafe block (synchronous) hash=5b2c35..bb762d number=31,142,703 newpayload_time=1.183ms     fcu2_time="568.712µs" total_time=1.752ms mgas=2.016 mgasps=1150.031"#,
            "block",
            31_142_703,
            Some(1_752_000),
            "5b2c35..bb762d",
        );
        check("op-node", "INFO [03-27|10:44:21.877] Received signed execution payload from p2p id=5b2c35..bb762d:31142703 peer=16Uiu2HAmH3xfYGjaJDw6sxa8ds3bVwMYLZRpPzpTtTrYq7G4nZs3 txs=13",
            "payload_received", 31_142_703, None, "5b2c35..bb762d");
    }

    #[test]
    fn besu_lines() {
        // hyperledger/besu issue #4399 (2022).
        check("besu", "2022-09-15 10:05:47.679-04:00 | vert.x-worker-thread-0 | INFO  | EngineNewPayload | Imported #15,539,577 / 23 tx / base fee 13.74 gwei / 1,454,631 (4.8%) gas / (0x1b235d11164706423ec3824d80920f3eff19ce54084319cdc9fd035e36501ec8) in 0.057s. Peers: 24",
            "block", 15_539_577, Some(57_000_000), "0x1b235d11");
        // hyperledger/besu PR #6466 (2024, JSON layout).
        check(
            "besu",
            r#"{"@timestamp":"2024-01-25T11:21:32,538","level":"INFO","thread":"vert.x-worker-thread-0","class":"AbstractEngineNewPayload","message":"Imported #10,431,117 / 44 tx / 16 ws / 3 blobs / base fee 11 wei / 4,868,888 (16.2%) gas / (0x79916291a34d7075190b88872c06ee9e89b5350fd04e57b0430c2a6da3620a45) in 0.874s. Peers: 1","throwable":""}"#,
            "block",
            10_431_117,
            Some(874_000_000),
            "0x79916291",
        );
        // hyperledger/besu PR #8585 (2025).
        check(
            "besu",
            r#"{"@timestamp":"2025-04-28T14:37:31,218","level":"INFO","thread":"vert.x-worker-thread-0","class":"AbstractEngineNewPayload","message":"Imported #23,116  (17a22.....7193c)|    0 tx| 16 ws| 0 blobs| base fee      7 wei| gas used           0 (  0.0%)| exec time 0.002s| mgas/s   0.00| peers:  7","throwable":""}"#,
            "block",
            23_116,
            Some(2_000_000),
            "17a22.....7193c",
        );
        // The current layout, formatted as AbstractEngineNewPayload.logImportedBlockInfo's
        // format string prints it (no public log of this layout was found to quote).
        check("besu", "Imported #25,268,932  (571ca.....32896)|  292 tx| 16 ws|  3 blobs| 117.07 mwei bfee|  34,833,694 ( 58.1%) gas used| 671.1ms exec|  51.91 Mgas/s|  1 peers",
            "block", 25_268_932, Some(671_100_000), "571ca");
    }

    #[test]
    fn lodestar_lines() {
        // ChainSafe/lodestar issue #3482.
        check("lodestar", "Dec-03 07:58:18.002 []                 info: Synced - slot: 886 - head: 886 0xbf17…fd24 - finalized: 0x0000…0000:0 - peers: 1",
            "slot", 886, None, "0xbf17…fd24");
        // ChainSafe/lodestar issue #8216: the current layout, head behind the clock.
        let m = Matcher::new(compile(find("lodestar").unwrap()))
            .marker(0, "Aug-15 16:54:18.057[]                 info: Synced - slot: 53071 - head: (slot -1) 0x7631…6181 - exec-block: valid(42208 0xe5d3…) - finalized: 0x7cd2…40f1:1656 - peers: 109")
            .unwrap();
        assert_eq!(
            (m.name.as_str(), m.slot, m.number, m.hash.as_deref()),
            ("slot", Some(53_071), Some(42_208), Some("0x7631…6181"))
        );
        check("lodestar", "Aug-15 16:54:06.505[]                 info: Synced - slot: 53070 - head: 0x7631…6181 - exec-block: valid(42208 0xe5d3…) - finalized: 0x7cd2…40f1:1656 - peers: 106",
            "slot", 42_208, None, "0x7631…6181");
    }

    #[test]
    fn sets_are_chosen_from_names_else_all() {
        let names = |v: Vec<&BuiltinSet>| v.iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(
            names(select(&["ghcr.io/paradigmxyz/op-reth:v1.1", "op-reth-seq"])),
            ["reth"]
        );
        assert_eq!(
            names(select(&["us-docker.pkg.dev/oplabs/op-geth:latest"])),
            ["geth"]
        );
        assert_eq!(names(select(&["ethereum/client-go:v1.14"])), ["geth"]);
        assert_eq!(names(select(&["op-node"])), ["op-node"]);
        assert_eq!(names(select(&["hyperledger/besu:24"])), ["besu"]);
        assert_eq!(names(select(&["chainsafe/lodestar"])), ["lodestar"]);
        assert_eq!(
            select(&["devprof-demo-node:latest", "demo-blocks"]).len(),
            SETS.len()
        );
        assert!(help_text().contains("AbstractEngineNewPayload"));
    }
}
