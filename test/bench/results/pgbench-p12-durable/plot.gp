set terminal pngcairo size 1500,900 font ',10'
set output 'throughput.png'
set multiplot layout 2,3 title 'libcompaction vs pgbench (same SQL) vs rejected designs: throughput by client threads'
set logscale x 2
set xtics (1,4,16)
set xrange [0.8:20]
set yrange [0:*]
set key top left font ',8'
set grid
set xlabel 'client threads'
set ylabel 'tx/s'
set title '(1) increment: LockCompactionHead + ProduceInTx + commit, 10,000 uniform keys' font ',9'
plot for [i=2:*] 'throughput_inc.dat' using 1:i with linespoints lw 2 title columnheader(i)
set title '(3) lock-only on always-new keys (headless-row creation)' font ',9'
plot for [i=2:*] 'throughput_new.dat' using 1:i with linespoints lw 2 title columnheader(i)
set title '(5) compacted Produce without a lock, 10,000 keys' font ',9'
plot for [i=2:*] 'throughput_produce.dat' using 1:i with linespoints lw 2 title columnheader(i)
unset multiplot
