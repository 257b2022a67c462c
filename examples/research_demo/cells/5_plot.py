import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.5))

points = ax1.scatter(df["params_millions"], df["top1_accuracy"], c=df["year"], cmap="viridis", s=60, zorder=3)
# Place each label beside its point, trying a few vertical offsets until its box
# (estimated in data units: log10 of millions across, top-1 % up) overlaps no other.
boxes = []
for _, r in df.sort_values("params_millions").iterrows():
    x, y = math.log10(r["params_millions"]), r["top1_accuracy"]
    width = 0.021 * len(r["model"])
    for dy in (4, -11, 13, -20):
        box = (x + 0.01, y + dy * 0.09, x + 0.01 + width, y + dy * 0.09 + 0.8)
        if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes):
            break
    boxes.append(box)
    ax1.annotate(r["model"], (r["params_millions"], y), textcoords="offset points", xytext=(5, dy), fontsize=8)
ax1.scatter([best["params_millions"]], [best["top1_accuracy"]], marker="*", s=500, facecolors="none",
            edgecolors="red", linewidths=1.5, zorder=4)
ax1.set_xscale("log")
ax1.set_xlabel("parameters (millions, log scale)")
ax1.set_ylabel("ImageNet-1k top-1 accuracy (%)")
ax1.set_title(f"Top-1 accuracy vs. parameters\n(red star: most accurate per parameter, {best['model']})")
ax1.grid(True, which="both", alpha=0.3)
fig.colorbar(points, ax=ax1, label="year")

ax2.plot(best_eff_by_year.index, best_eff_by_year["acc_per_mparam"], "o-", color="tab:blue",
         label="best top-1 % per million parameters")
for year, r in best_eff_by_year.iterrows():
    ax2.annotate(r["model"], (year, r["acc_per_mparam"]), textcoords="offset points", xytext=(4, 6), fontsize=8)
ax2.set_yscale("log")
ax2.set_xlabel("year")
ax2.set_ylabel("top-1 % per million parameters (log scale)", color="tab:blue")
ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
ax2.set_xlim(best_eff_by_year.index.min() - 0.5, best_eff_by_year.index.max() + 1.5)  # room for labels
ax2.grid(True, which="both", alpha=0.3)
ax3 = ax2.twinx()
ax3.plot(best_acc_by_year.index, best_acc_by_year["top1_accuracy"], "s--", color="tab:orange",
         label="best top-1 accuracy (%)")
ax3.set_ylabel("best top-1 accuracy (%)", color="tab:orange")
ax2.set_title("Best model of each year")
lines = ax2.get_lines() + ax3.get_lines()
ax2.legend(lines, [line.get_label() for line in lines], loc="lower center")

fig.suptitle("ImageNet-1k single-crop top-1 (torchvision reference weights)")
fig.tight_layout()
fig.savefig("outputs/accuracy_per_param.png", dpi=110)
plt.close(fig)
print("wrote outputs/accuracy_per_param.png")
