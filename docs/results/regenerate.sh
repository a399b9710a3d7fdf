#!/usr/bin/env bash
# Every file under docs/results, from the commands the docs cite, in one place:
#
#   bash docs/results/regenerate.sh [all | dogi | minos | shiro | adapt | hybrid | fleet | peers | reproduction ...]
#   (or: make results RESULTS="minos shiro")
#
# Runs from the repository root with the project's venv (PYTHON=... to use another). Sweeps go to
# multirun/results/<name> (kept, so a report can be rebuilt from them). The command line pins the
# numerics (DOGI_ML_NUMERICS=portable, dogi_ml/determinism.py), so the files come out the same to
# the last digit on any x86-64 machine; each JSON records its code path under "numerics"
# ("settings.numerics" in the summaries). Hours on 2 cores: dogi (the learned schemes) is the
# longest, then minos (MiDAS's configuration search at 32-block segments) and adapt at 1M blocks.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
R=docs/results
SWEEPS=multirun/results

run() { echo "+ $*" >&2; "$PY" -m dogi_ml --quiet "$@"; }
sweep() { local name=$1; shift; run simulate -m "$@" "hydra.sweep.dir=$SWEEPS/$name"; }

dogi() {
    sweep dogi_fig10 +experiment=dogi_fig10 output=$R/dogi_fig10.json
    sweep dogi_fig10_more +experiment=dogi_fig10 policy=sepgc,mida,dac,warcip output=$R/dogi_fig10_more_baselines.json
    sweep dogi_fig11 +experiment=dogi_fig11 output=$R/dogi_fig11.json
    sweep dogi_fig12 +experiment=dogi_fig12 output=$R/dogi_fig12.json
    sweep dogi_fig13 +experiment=dogi_fig13 output=$R/dogi_fig13.json
    sweep dogi_fig14 +experiment=dogi_fig14 output=$R/dogi_fig14.json
    sweep dogi_gap +experiment=dogi_gap output=$R/dogi_gap
}

minos() {
    run oracle +experiment=minos_table1 output=$R/minos_table1.json
    sweep minos_fig11 +experiment=minos_fig11 output=$R/minos_fig11
    sweep minos_fig11_traces +experiment=minos_fig11_traces output=$R/minos_fig11_traces
    sweep minos_fig11_64k +experiment=minos_fig11_64k output=$R/minos_fig11_64k
    sweep minos_fig17 +experiment=minos_fig17 output=$R/minos_fig17
    sweep minos_fig17_streams +experiment=minos_fig17_streams output=$R/minos_fig17_streams
    sweep minos_fig17_segment +experiment=minos_fig17_segment output=$R/minos_fig17_segment
    sweep minos_fig18 +experiment=minos_fig18 output=$R/minos_fig18
    # Fig. 19: one MINOS run logging its clusterings, then the plot of the mapping over time
    run simulate +workload=phase_shift policy=minos ++policy.params.mapping_log=5000 sim.op_ratio=0.15 \
        plot=false mlflow=false sim.output=$SWEEPS/minos_fig19.json
    "$PY" -m dogi_ml.report_minos $R/minos_fig19 --clustering $SWEEPS/minos_fig19.json
    # MINOS's metadata layouts against the same baselines (the minos_fig11* sweeps above)
    local name params
    for name in agg1 ids8 ids32; do
        case $name in
            agg1) params="policy.params.agg=1" ;;
            ids8) params="policy.params.agg_ids=block" ;;
            ids32) params="policy.params.agg_ids=block policy.params.agg=32" ;;
        esac
        # shellcheck disable=SC2086
        sweep minos_$name +experiment=minos_fig11 policy=minos $params
        # shellcheck disable=SC2086
        sweep minos_${name}_t +experiment=minos_fig11_traces policy=minos $params
        "$PY" -m dogi_ml.report_minos $R/minos_fig11_$name $SWEEPS/minos_fig11 $SWEEPS/minos_fig11_traces \
            $SWEEPS/minos_$name $SWEEPS/minos_${name}_t --drop minos
    done
}

shiro() {
    sweep shiro_fig7 +experiment=shiro_fig7 output=$R/shiro_fig7
    sweep shiro_fig7_traces +experiment=shiro_fig7_traces output=$R/shiro_fig7_traces
    sweep shiro_fig9 +experiment=shiro_fig9 output=$R/shiro_fig9
    # Table V: the classifier of the Shiro and PHFTL runs above (generated workloads and samples)
    "$PY" -m dogi_ml.report_shiro $R/shiro_table5 $SWEEPS/shiro_fig7 $SWEEPS/shiro_fig7_traces \
        --title "Shiro Table V / Fig. 8 (reduced scale): page classifier per workload" \
        --note "The Shiro and PHFTL runs of shiro_fig7 and shiro_fig7_traces, scored online: when an LBA is \
rewritten, the class predicted at its previous write (short / long; unseen first writes and writes before the \
first model are not scored) against its actual lifetime vs the threshold T in force; positive class \
short-living. PHFTL's figures are for its own threshold, a different split: not a like-for-like comparison. \
The plot's right panel is the cumulative accuracy at each window's end (Fig. 8)."
    sweep shiro_agent +experiment=shiro_agent output=$R/shiro_agent
    # the per-decision credit agent (rl/credit.py) and the oracle: the first sweep saves the tables the second runs frozen
    sweep shiro_agent_credit +experiment=shiro_agent_credit
    sweep shiro_agent_credit_deployed +experiment=shiro_agent_credit_deployed
    "$PY" -m dogi_ml.report_shiro $R/shiro_agent_credit $SWEEPS/shiro_agent_credit $SWEEPS/shiro_agent_credit_deployed \
        --title "Shiro - the per-decision credit agent vs the paper agent, its rule, SepBIT age classes and the oracle"
    # relocation by write counts (agent=frequency) and the credit agent on a count state (issue 40)
    sweep shiro_agent_counts +experiment=shiro_agent_counts
    # the hindsight credit's Table I table (saved by the sweep above) frozen, float and int8
    sweep shiro_agent_hindsight_deployed +experiment=shiro_agent_credit_deployed qtable_from=credit_hindsight
    "$PY" -m dogi_ml.report_shiro $R/shiro_agent_counts $SWEEPS/shiro_agent_credit $SWEEPS/shiro_agent_counts \
        $SWEEPS/shiro_agent_hindsight_deployed \
        --title "Shiro - relocation by write counts and the credit agent on a count state, against the rule, SepBIT age classes and the oracle"
    # the count-state hindsight agent with decaying counts: its table (saved by the counts sweep) frozen, float and int8
    sweep shiro_agent_counts_decay_learn +experiment=shiro_agent_counts +shiro_agent_variant=credit_counts_hindsight_decay
    sweep shiro_agent_counts_decay_deployed +experiment=shiro_agent_credit_deployed qtable_from=credit_counts_hindsight_decay \
        ++policy.params.credit_state=counts ++policy.params.count_halflife=0.25
    "$PY" -m dogi_ml.report_shiro $R/shiro_agent_counts_deployed $SWEEPS/shiro_agent_counts_decay_learn \
        $SWEEPS/shiro_agent_counts_decay_deployed \
        --title "Shiro - the count-state hindsight agent (count_halflife=0.25), learning and its table frozen (float, int8)"
    # the same agent with one bit more in its state: whether the LBA has been read since its user
    # write (credit_state=counts_read); beside it the count state alone and the two rules, rerun, and
    # its table (saved by the first sweep) frozen, float and int8
    sweep shiro_agent_read_learn +experiment=shiro_agent_counts \
        +shiro_agent_variant=credit_counts_read_hindsight_decay,credit_counts_hindsight_decay
    sweep shiro_agent_read_rules +experiment=shiro_agent_credit ++policy.params.agent=hierarchical,sepbit_age
    sweep shiro_agent_read_deployed +experiment=shiro_agent_credit_deployed \
        qtable_from=credit_counts_read_hindsight_decay ++policy.params.credit_state=counts_read \
        ++policy.params.count_halflife=0.25
    "$PY" -m dogi_ml.report_shiro $R/shiro_agent_read $SWEEPS/shiro_agent_read_learn $SWEEPS/shiro_agent_read_rules \
        $SWEEPS/shiro_agent_read_deployed \
        --title "Shiro - the count-state hindsight agent with a read bit (credit_state=counts_read), against the rule and SepBIT age classes"
    sweep shiro_bggc +experiment=shiro_bggc output=$R/shiro_bggc
    sweep shiro_readings +experiment=shiro_readings output=$R/shiro_readings
    sweep shiro_watermarks +experiment=shiro_watermarks output=$R/shiro_watermarks
    sweep shiro_readings_default +experiment=shiro_readings_default output=$R/shiro_readings_default
}

adapt() {
    sweep adapt_fig8 +experiment=adapt_fig8 output=$R/adapt_fig8
    sweep adapt_fig9 +experiment=adapt_fig9 output=$R/adapt_fig9
    sweep adapt_fig11 +experiment=adapt_fig11 output=$R/adapt_fig11
    sweep adapt_fig11_skew +experiment=adapt_fig11_skew output=$R/adapt_fig11_skew
    # ++: the workload group comes from the preset's sweep, so the key is not there before it
    sweep adapt_fig11_1m +experiment=adapt_fig11 ++workload.capacity_blocks=1048576 output=$R/adapt_fig11_1m
    sweep adapt_fig11_skew_1m +experiment=adapt_fig11_skew ++workload.capacity_blocks=1048576 \
        output=$R/adapt_fig11_skew_1m
}

hybrid() {
    # issue 40: the hybrid against every seed scheme and the oracles, its ablation (docs/hybrid.md)
    sweep hybrid +experiment=hybrid output=$R/hybrid
    sweep hybrid_alt +experiment=hybrid_alt output=$R/hybrid_alt
    sweep hybrid_traces +experiment=hybrid_traces output=$R/hybrid_traces
    sweep hybrid_ablation +experiment=hybrid_ablation output=$R/hybrid_ablation
    # the same at 16 GiB on zipf and ycsb_a, with the causal lifetimes=select hot_filter=auto hybrid (a second sweep)
    sweep hybrid_16g +experiment=hybrid_16g
    sweep hybrid_16g_select +experiment=hybrid_16g policy=hybrid policy.params.lifetimes=select policy.params.hot_filter=auto
    sweep hybrid_16g_select_mh05 +experiment=hybrid_16g policy=hybrid policy.params.lifetimes=select \
        policy.params.hot_filter=auto policy.params.min_horizon=0.5
    sweep hybrid_16g_select_cbsepbit_mh05 +experiment=hybrid_16g policy=hybrid policy.params.lifetimes=select \
        policy.params.hot_filter=auto policy.params.min_horizon=0.5 policy.victim=cost_benefit_sepbit
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_16g $SWEEPS/hybrid_16g $SWEEPS/hybrid_16g_select $SWEEPS/hybrid_16g_select_mh05 \
        $SWEEPS/hybrid_16g_select_cbsepbit_mh05 \
        --title "Hybrid - WAF per scheme (16 GiB, 10% OP)"
    # "What limits the hybrid": other lifetime sources through the same planner, the closed form, the lifetimes' shape
    local title="Hybrid - what limits it: lifetimes from write probabilities, counts so far and the truth (1 GiB, 10% OP)"
    sweep hybrid_bound +experiment=hybrid_bound
    sweep hybrid_bound_generator +experiment=hybrid_bound_generator
    sweep hybrid_bound_decay +experiment=hybrid_bound_decay
    sweep hybrid_bound_fifo +experiment=hybrid_bound_fifo
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_bound $SWEEPS/hybrid_bound $SWEEPS/hybrid_bound_generator \
        $SWEEPS/hybrid_bound_decay --reuse $R/hybrid.json --title "$title"
    "$PY" -m dogi_ml.report_hybrid --closed-form $R/hybrid_bound_closed_form $SWEEPS/hybrid_bound_fifo \
        $SWEEPS/hybrid_bound $SWEEPS/hybrid_bound_generator
    "$PY" -m dogi_ml.report_hybrid --lifetime-shape $R/hybrid_bound_shape zipf ycsb_a ycsb_f varmail phase_shift
    # "The planner's WAF model": the FIFO-group planner against the OP-model one
    sweep hybrid_planner +experiment=hybrid_planner
    "$PY" -m dogi_ml.report_hybrid --planner $R/hybrid_bound_planner $SWEEPS/hybrid_planner $SWEEPS/hybrid_bound
    # "Choosing the lifetime source online": lifetimes=select (Hot Filter auto, on, off) on the
    # generated workloads, the samples and the alternating workload, beside the tables above
    sweep hybrid_select +experiment=hybrid_select
    # the same select/auto hybrid with CB [SepBIT] behind its expiry selector
    sweep hybrid_select_cbsepbit +experiment=hybrid_select "policy.params={lifetimes: select, hot_filter: auto}" \
        policy.victim=cost_benefit_sepbit
    sweep hybrid_select_cbsepbit_mh05 +experiment=hybrid_select \
        "policy.params={lifetimes: select, hot_filter: auto, min_horizon: 0.5}" policy.victim=cost_benefit_sepbit
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select $SWEEPS/hybrid_select $SWEEPS/hybrid_select_cbsepbit \
        $SWEEPS/hybrid_select_cbsepbit_mh05 --reuse $R/hybrid.json
    # plans on the counts' predictions until the samples mature (early_plan), with either rule behind expiry
    sweep hybrid_select_early +experiment=hybrid_select "policy.params={lifetimes: select, hot_filter: auto, early_plan: true}"
    sweep hybrid_select_early_cbsepbit +experiment=hybrid_select \
        "policy.params={lifetimes: select, hot_filter: auto, early_plan: true}" policy.victim=cost_benefit_sepbit
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select_early $SWEEPS/hybrid_select_early $SWEEPS/hybrid_select_early_cbsepbit \
        --reuse $R/hybrid_select.json --title "Hybrid - plans on the counts' predictions until the samples mature (1 GiB, 10% OP)"
    # the same with CB [SepBIT], the undecayed counts restarting at detected changes (count_reset)
    sweep hybrid_select_reset +experiment=hybrid_select policy.victim=cost_benefit_sepbit \
        "policy.params={lifetimes: select, hot_filter: auto, early_plan: true, count_reset: 50}"
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select_reset $SWEEPS/hybrid_select_reset \
        --reuse $R/hybrid_select_early.json --title "Hybrid - counts that restart at a detected change (1 GiB, 10% OP)"
    # its ablation: one part at a time taken out of the select/auto hybrid
    sweep hybrid_ablation_select +experiment=hybrid_ablation_select
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_ablation_select $SWEEPS/hybrid_ablation_select \
        --reuse $R/hybrid_select.json --title "Hybrid - ablation of lifetimes=select hot_filter=auto (1 GiB, 10% OP)"
    sweep hybrid_select_traces +experiment=hybrid_select_traces
    sweep hybrid_select_traces_mh05 +experiment=hybrid_select_traces policy=hybrid policy.params.hot_filter=auto \
        policy.params.min_horizon=0.5
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select_traces $SWEEPS/hybrid_select_traces $SWEEPS/hybrid_select_traces_mh05 \
        --reuse $R/hybrid_traces.json
    # the samples again with MiDAS's cost-benefit with the square root of age for every follower and the hybrid
    sweep hybrid_traces_sqrt +experiment=hybrid_traces_sqrt
    sweep hybrid_traces_sqrt_hybrid +experiment=hybrid_traces_sqrt policy=hybrid policy.victim=cost_benefit_sqrt \
        policy.params.lifetimes=model,select policy.params.hot_filter=true,auto
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_traces_sqrt $SWEEPS/hybrid_traces_sqrt $SWEEPS/hybrid_traces_sqrt_hybrid \
        --title "Hybrid - WAF per scheme, real trace samples, cost-benefit by the square root of age (32-block segments, 15% OP)"
    sweep hybrid_select_alt +experiment=hybrid_select_alt
    sweep hybrid_select_alt_cbsepbit +experiment=hybrid_select_alt policy=hybrid policy.params.hot_filter=auto \
        policy.victim=cost_benefit_sepbit
    sweep hybrid_select_alt_mh05 +experiment=hybrid_select_alt policy=hybrid policy.params.hot_filter=auto \
        policy.params.min_horizon=0.5
    sweep hybrid_select_alt_cbsepbit_mh05 +experiment=hybrid_select_alt policy=hybrid policy.params.hot_filter=auto \
        policy.params.min_horizon=0.5 policy.victim=cost_benefit_sepbit
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select_alt $SWEEPS/hybrid_select_alt $SWEEPS/hybrid_select_alt_cbsepbit \
        $SWEEPS/hybrid_select_alt_mh05 $SWEEPS/hybrid_select_alt_cbsepbit_mh05 \
        --reuse $R/hybrid_alt.json \
        --workload zipf_hc_alternating --title "Hybrid - the lifetime source chosen online, alternating Zipf-H / Zipf-C (1 GiB, 10% OP)"
    sweep hybrid_select_alt_early +experiment=hybrid_select_alt policy=hybrid policy.params.hot_filter=auto \
        policy.params.early_plan=true
    sweep hybrid_select_alt_early_cbsepbit +experiment=hybrid_select_alt policy=hybrid policy.params.hot_filter=auto \
        policy.params.early_plan=true policy.victim=cost_benefit_sepbit
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select_alt_early $SWEEPS/hybrid_select_alt_early \
        $SWEEPS/hybrid_select_alt_early_cbsepbit --reuse $R/hybrid_select_alt.json --workload zipf_hc_alternating \
        --title "Hybrid - plans on the counts' predictions until the samples mature, alternating Zipf-H / Zipf-C (1 GiB, 10% OP)"
    sweep hybrid_select_alt_reset +experiment=hybrid_select_alt policy=hybrid policy.params.hot_filter=auto \
        policy.params.early_plan=true policy.victim=cost_benefit_sepbit ++policy.params.count_reset=50
    "$PY" -m dogi_ml.report_hybrid $R/hybrid_select_alt_reset $SWEEPS/hybrid_select_alt_reset \
        --reuse $R/hybrid_select_alt_early.json --workload zipf_hc_alternating \
        --title "Hybrid - counts that restart at a detected change, alternating Zipf-H / Zipf-C (1 GiB, 10% OP)"
    # "Deployment": the hybrid's and DOGI's bundles of seed 0 deployed on seed 1 (out of sample) and on
    # seed 0, the online schemes on seed 1 (exports the bundles itself; ~35 min on 2 cores)
    "$PY" -m dogi_ml.pipeline.frozen_seeds $R/hybrid_frozen_seeds zipf ycsb_a phase_shift varmail \
        --runs $SWEEPS/hybrid_frozen_seeds
    # the count bundle: the select/auto hybrid's last plan (per-LBA write counts) frozen, the same way
    "$PY" -m dogi_ml.pipeline.frozen_seeds $R/hybrid_frozen_counts_seeds zipf ycsb_a phase_shift varmail \
        --runs $SWEEPS/hybrid_frozen_counts_seeds --frozen hybrid_frozen \
        --scheme-set hybrid=++policy.params.lifetimes=select --scheme-set hybrid=++policy.params.hot_filter=auto
}

fleet() {
    # docs/fleets.md's worked example: 100 synthetic volumes, every scheme of conf/policy (the two
    # frozen ones deploy a bundle a dogi / hybrid run exports on each volume): the 22 of the
    # first run, then hybrid_frozen (added later) beside the four it is read against. ~50 min on
    # 2 idle cores.
    local out=$SWEEPS/fleet_study first="nosep,sepgc,sepbit,mida,dac,warcip,midas,minos,adapt,sepbit_ng"
    first+=",phftl,phftl_ng,mldt,shiro,shiro_ng,shiro_cb,dogi,dogi_frozen,hybrid,fk,kstream_oracle,nodap"
    rm -rf "$SWEEPS/fleet100"
    run fleet out=$SWEEPS/fleet100 n_volumes=100 seed=0 spec.wss_min=4096 spec.wss_median=6144 \
        spec.wss_max=24576 spec.traffic_min=8
    run study fleet=$SWEEPS/fleet100 policy=$first study.frozen_bundle=same_trace \
        sim.segment_blocks=16 sim.op_ratio=0.15 out="$out"
    cp "$out/aggregate.md" $R/fleet_study.md
    cp "$out/aggregate.json" $R/fleet_study.json
    cp "$out/waf_cdf.png" $R/fleet_study_waf_cdf.png
    cp "$out/waf_cdf.json" $R/fleet_study_waf_cdf.json
    cp "$out/results.parquet" $R/fleet_study_results.parquet
    run study fleet=$SWEEPS/fleet100 policy=sepbit,dogi,dogi_frozen,hybrid,hybrid_frozen \
        study.frozen_bundle=same_trace sim.segment_blocks=16 sim.op_ratio=0.15 out="${out}_frozen"
    cp "${out}_frozen/aggregate.md" $R/fleet_study_frozen.md
    cp "${out}_frozen/aggregate.json" $R/fleet_study_frozen.json
    cp "${out}_frozen/results.parquet" $R/fleet_study_frozen_results.parquet
}

peers() {
    # our side of the parity with the authors' simulators (their side is recorded: docs/peers.md)
    "$PY" tests/test_peer_parity.py --update
}

reproduction() {
    "$PY" -m dogi_ml report reproduction
}

families=("$@")
[ ${#families[@]} -eq 0 ] && families=(all)
for f in "${families[@]}"; do
    case $f in
        all) dogi; minos; shiro; adapt; hybrid; fleet; peers; reproduction ;;
        dogi | minos | shiro | adapt | hybrid | fleet | peers | reproduction) "$f" ;;
        *) echo "regenerate.sh: unknown family '$f' (all, dogi, minos, shiro, adapt, hybrid, fleet, peers, reproduction)" >&2; exit 2 ;;
    esac
done
