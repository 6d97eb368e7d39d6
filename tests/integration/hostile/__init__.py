"""The hostile-tenant acceptance suite of issue 14: tenant isolation against an attacker."""
