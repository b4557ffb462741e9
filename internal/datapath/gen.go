package datapath

// The BPF objects are compiled from bpf/ against the running kernel's BTF
// (bpf/include/vmlinux.h, made by `make vmlinux`); the generated files are not
// committed, `make build` regenerates them.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type santa_service -type santa_region -type santa_index_key -type santa_index_node -type santa_index_entry -type santa_index_layout -type santa_rule -type santa_rule_small -type santa_rule_medium -type santa_rule_large -type santa_rule_class -type santa_slot_layout -type santa_limit -type santa_default_capacity -type santa_sockopt -type santa_copy -type santa_service_stats -type santa_rule_stats -type santa_path -type santa_service_counter -type santa_meta_verdict -type santa_addr_key -type santa_addr_kind -type santa_learn_layout -type santa_learn_config -type santa_learn_sample -type santa_learn_row -type santa_parser -type santa_rule_flag -type santa_mc_layout -type santa_mc_counter -type santa_mc_slot -type santa_mc_domain -type santa_guard -type santa_mc_stats santa ../../bpf/santa_udp.bpf.c -- -I../../bpf/include
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type santa_conn -type santa_conn_flag -type santa_listener_key -type santa_tcp_path santaTcp ../../bpf/santa_tcp.bpf.c -- -I../../bpf/include
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type santa_handover_result santaHandover ../../bpf/santa_handover.bpf.c -- -I../../bpf/include
