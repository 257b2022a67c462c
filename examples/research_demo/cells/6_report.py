import json

years = best_eff_by_year.index
first, last = best_eff_by_year.loc[years.min()], best_eff_by_year.loc[years.max()]
peak_year = int(best_eff_by_year["acc_per_mparam"].idxmax())
peak = best_eff_by_year.loc[peak_year]
acc_first = best_acc_by_year.loc[years.min()]
acc_top_year = int(best_acc_by_year["top1_accuracy"].idxmax())
acc_top = best_acc_by_year.loc[acc_top_year]

trend = (f"Accuracy per parameter went from {first['acc_per_mparam']:.2f} %/M ({first['model']}, {years.min()}) "
         f"to a peak of {peak['acc_per_mparam']:.1f} %/M ({peak['model']}, {peak_year}); "
         f"the best of {years.max()} is {last['model']} at {last['acc_per_mparam']:.2f} %/M. "
         f"Over the same years the best top-1 accuracy rose from {acc_first['top1_accuracy']:.1f}% "
         f"({acc_first['model']}, {years.min()}) to {acc_top['top1_accuracy']:.1f}% ({acc_top['model']}, {acc_top_year}).")
if peak_year < years.max() and acc_top_year > peak_year:
    trend += (f" No model after {peak_year} in this table beats {peak['model']} per parameter: "
              "later models spend parameters on accuracy rather than on compactness.")

rows = ["| year | most accurate per parameter | top-1 %/M | top-1 | most accurate | top-1 |",
        "|---:|---|---:|---:|---|---:|"]
for year in years:
    e, a = best_eff_by_year.loc[year], best_acc_by_year.loc[year]
    rows.append(f"| {year} | {e['model']} | {e['acc_per_mparam']:.2f} | {e['top1_accuracy']:.1f}% "
                f"| {a['model']} | {a['top1_accuracy']:.1f}% |")

report = "\n".join([
    "# Accuracy per parameter on ImageNet-1k",
    "",
    f"Question: {QUESTION}",
    "",
    "## Answer",
    "",
    f"**Best model: {best['model']}** ({best['year']}): {best['top1_accuracy']:.1f}% top-1 with "
    f"{best['params_millions']:.2f} M parameters, that is {best['acc_per_mparam']:.1f} top-1 points per million parameters. "
    f"Among models with at least 75% top-1, {strong['model']} leads with {strong['acc_per_mparam']:.1f} %/M.",
    "",
    "## Trend",
    "",
    trend,
    "",
    *rows,
    "",
    "![accuracy vs parameters and best per year](accuracy_per_param.png)",
    "",
    "## Method",
    "",
    f"{len(df)} models from benchmarks.csv: single-crop top-1 on the ImageNet-1k validation set as published for "
    "torchvision's reference weights, parameter counts from the same weights (see SOURCES.md). "
    "Accuracy per parameter = top-1 % / millions of parameters. It favours small models and ignores "
    "FLOPs, input resolution and latency; the table is a selection, not every model of each year.",
    "",
])
with open("outputs/report.md", "w") as f:
    f.write(report)

summary = {
    "best_model": best["model"],
    "best_year": int(best["year"]),
    "best_acc_per_mparam": round(float(best["acc_per_mparam"]), 3),
    "best_per_year": {str(y): best_eff_by_year.loc[y, "model"] for y in years},
    "rows": len(df),
    "df_loads": df_loads,
    "preloaded": globals().get("PRELOADED", []),
}
with open("outputs/summary.json", "w") as f:
    json.dump(summary, f, indent=2)

print(f"wrote outputs/report.md ({len(report)} bytes) and outputs/summary.json")
print(f"answer: {best['model']} ({best['year']}) gives the best accuracy per parameter: {best['top1_accuracy']:.1f}% "
      f"top-1 with {best['params_millions']:.2f} M parameters ({best['acc_per_mparam']:.1f} %/M). {trend}")
print(f"state: the DataFrame was loaded {df_loads} time(s) in this session")
