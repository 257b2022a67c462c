print(df[["model", "year", "top1_accuracy", "params_millions"]].to_string(index=False))
print()
print("datasets:", ", ".join(sorted(df["dataset"].unique())))
print(f"years: {df['year'].min()}-{df['year'].max()}, missing values: {int(df.isna().sum().sum())}")
