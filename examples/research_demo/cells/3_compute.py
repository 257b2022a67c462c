df["acc_per_mparam"] = df["top1_accuracy"] / df["params_millions"]
ranked = df.sort_values("acc_per_mparam", ascending=False)
best = ranked.iloc[0]
strong = ranked[ranked["top1_accuracy"] >= 75].iloc[0]
best_eff_by_year = df.loc[df.groupby("year")["acc_per_mparam"].idxmax()].set_index("year")
best_acc_by_year = df.loc[df.groupby("year")["top1_accuracy"].idxmax()].set_index("year")

cols = ["model", "year", "top1_accuracy", "params_millions", "acc_per_mparam"]
print("top 5 by top-1 % per million parameters:")
print(ranked[cols].head(5).round(2).to_string(index=False))
print()
print(f"best: {best['model']} ({best['year']}), {best['top1_accuracy']:.1f}% top-1 with "
      f"{best['params_millions']:.2f} M parameters = {best['acc_per_mparam']:.1f} %/M")
print(f"best with top-1 >= 75%: {strong['model']} ({strong['acc_per_mparam']:.1f} %/M)")
print()
print("most accurate per parameter, by year:")
print(best_eff_by_year[["model", "acc_per_mparam", "top1_accuracy"]].round(2).to_string())
