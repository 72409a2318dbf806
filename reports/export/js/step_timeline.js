// The step timeline of each stage (section.steptl): drawn from its JSON
// (script.tl-data), zoomed and panned in place; a step chart's bar or
// point chooses the step. Embedded by tests/tools/embed_asset.py.
document.addEventListener('DOMContentLoaded',function(){
  document.querySelectorAll('section.steptl').forEach(function(sec){
    var d=JSON.parse(sec.querySelector('script.tl-data').textContent),by={};
    d.steps.forEach(function(s){
      by[s.i]=s;
    });
    var inp=sec.querySelector('input.tl-step'),box=sec.querySelector('div.tl-draw'),info=sec.querySelector('.tl-info'),W=1100,R=16,cur=null,z0=0,z1=1,NS;
    // The SVG namespace from the HTML parser: the page holds no URL (self-contained).
    box.innerHTML='<svg></svg>';
    NS=box.firstChild.namespaceURI;
    box.textContent='';
    function col(n){
      var h=2166136261;
      for(var k=0;k<n.length;k++){
        h=Math.imul(h^n.charCodeAt(k),16777619)>>>0;
      }
      return 'hsl('+(h%360)+',55%,62%)';
    }
    // Ops in one muted grey-blue family, lighter or darker by name: apart from the actions' hues.
    function opcol(n){
      var h=2166136261;
      for(var k=0;k<n.length;k++){
        h=Math.imul(h^n.charCodeAt(k),16777619)>>>0;
      }
      return 'hsl(210,18%,'+(48+h%28)+'%)';
    }
    function el(t,a){
      var e=document.createElementNS(NS,t);
      for(var k in a)e.setAttribute(k,a[k]);
      return e;
    }
    function draw(){
      box.textContent='';
      if(!cur){
        var v=+inp.value;
        info.textContent=v<0||v>+inp.max?d.stage+' step '+v+' was not recorded by this process (its steps are 0-'+inp.max+')':d.stage+' step '+v+' is not embedded'+(d.cmd?'; export it: '+d.cmd.replace(/N/g,v):'');
        sec.setAttribute('data-drawn','');
        return;
      }
      var t0=performance.now(),dur=Math.max(1,cur.e-cur.b),a=z0*dur,span=(z1-z0)*dur,rows={},order=[],n=0;
      // GPU work on rows keyed 's'+stream, after the threads.
      var all=cur.s.concat((cur.o||[]).map(function(x){
        return [x[0],x[1],x[2],x[3],x[4],2];
      }),(cur.g||[]).map(function(x){
        return [x[0],'s'+x[1],x[2],x[3],x[4],1];
      }));
      all.forEach(function(x){
        var t=x[1];
        if(!(t in rows)){
          rows[t]=0;
          order.push(t);
        }
        rows[t]=Math.max(rows[t],x[4]+1);
      });
      // Allocator events: one row of ticks per thread, keyed 'm'+tid, after the threads' rows.
      var mk=cur.m||[];
      mk.forEach(function(x){
        var t='m'+x[0];
        if(!(t in rows)){
          rows[t]=1;
          order.push(t);
        }
      });
      // c10d calls: one row of ticks per thread, keyed 'c'+tid.
      var ck=cur.c||[];
      ck.forEach(function(x){
        var t='c'+x[0];
        if(!(t in rows)){
          rows[t]=1;
          order.push(t);
        }
      });
      var y0={},h=0;
      order.forEach(function(t){
        y0[t]=h+14;
        h+=14+rows[t]*R;
      });
      var svg=el('svg',{
        width:W,height:h+2,'class':'tl','data-step':cur.i,'data-z0':z0,'data-z1':z1
      });
      order.forEach(function(t){
        var l=el('text',{
          x:2,y:y0[t]-3
        });
        l.textContent=(typeof t=='string'?(t[0]=='m'?'memory, thread '+t.slice(1):t[0]=='c'?'collectives, thread '+t.slice(1):'GPU stream '+t.slice(1)):'thread '+t+(t==d.tid?' (loop)':''));
        svg.appendChild(l);
      });
      all.forEach(function(x){
        if(x[3]<a||x[2]>a+span)return;
        var nm=d.names[x[0]],x0=(x[2]-a)/span*W,w=Math.max(0.5,(x[3]-x[2])/span*W);
        if(x0<0){
          w+=x0;
          x0=0;
        }
        if(x0+w>W)w=W-x0;
        var g=el('rect',{
          'class':['sl','sl gpu','sl op'][x[5]||0],x:x0.toFixed(2),y:y0[x[1]]+x[4]*R,width:w.toFixed(2),height:R-2,fill:x[5]==2?opcol(nm):col(nm),'data-name':nm,'data-tid':x[1],'data-b':x[2],'data-e':x[3]
        });
        var tt=el('title',{});
        tt.textContent=nm+' \u2014 '+((x[3]-x[2])/1e3).toFixed(1)+' \u00b5s';
        g.appendChild(tt);
        svg.appendChild(g);
        n++;
        if(w>60){
          var tx=el('text',{
            x:(x0+2).toFixed(2),y:y0[x[1]]+x[4]*R+11
          });
          tx.textContent=nm.slice(0,Math.floor(w/7));
          svg.appendChild(tx);
        }
      });
      mk.forEach(function(x){
        if(x[1]<a||x[1]>a+span)return;
        var r=el('rect',{
          'class':'mem',x:((x[1]-a)/span*W).toFixed(2),y:y0['m'+x[0]],width:1,height:R-2,fill:x[3]&2?'#000':x[2]<0?'#d33':'#2a2','data-tid':x[0],'data-t':x[1],'data-bytes':x[2]
        });
        var tt=el('title',{});
        tt.textContent=(x[3]&2?'out of memory':x[2]<0?'freed':'allocated')+' '+Math.abs(x[2])+' B'+(x[3]&1?' (CUDA)':' (CPU)');
        r.appendChild(tt);
        svg.appendChild(r);
        n++;
      });
      // [tid, ns from begin, kind, seq, pg, bytes]: a 2 px purple tick at the call's entry.
      ck.forEach(function(x){
        if(x[1]<a||x[1]>a+span)return;
        var r=el('rect',{
          'class':'comm',x:((x[1]-a)/span*W).toFixed(2),y:y0['c'+x[0]],width:2,height:R-2,fill:'#7b3fb0','data-tid':x[0],'data-t':x[1],'data-kind':x[2],'data-seq':x[3],'data-pg':x[4],'data-bytes':x[5]
        });
        var tt=el('title',{});
        tt.textContent=x[2]+' #'+x[3]+' (pg '+x[4]+'), '+x[5]+' B, entered';
        r.appendChild(tt);
        svg.appendChild(r);
        n++;
      });
      box.appendChild(svg);
      sec.setAttribute('data-drawn',cur.i);
      // The draw's own time, read by bench/dashboard_page.py.
      sec.setAttribute('data-draw-ms',(performance.now()-t0).toFixed(2));
      var k=d.stage=='train'?off(sec):0;
      info.textContent=d.stage+' step '+cur.i+(k?' (common step '+(cur.i+k)+')':'')+': '+(dur/1e6).toFixed(3)+' ms, '+cur.s.length+' actions'+(cur.cut?' (cut to the page budget)':'')+(cur.o?', '+cur.o.length+' aten ops'+(cur.ot?' ('+cur.ot+' more thinned out for the page budget: kept the outermost, longest first)':''):'')+(cur.ox?' (past the op calls kept: ops missing)':'')+(cur.m?', '+cur.m.length+' memory events'+(cur.mt?' ('+cur.mt+' more thinned out)':''):'')+(cur.c?', '+cur.c.length+' c10d calls'+(cur.ct?' ('+cur.ct+' more left out)':''):'')+(cur.g?', '+cur.g.length+' GPU kernels/copies':'')+'; view '+(a/1e6).toFixed(3)+'..'+((a+span)/1e6).toFixed(3)+' ms; '+n+' drawn.'+(d.cmd?' Perfetto/Chrome file of this step: '+d.cmd.replace(/N/g,cur.i):cur.w?' Perfetto/Chrome file of this step: ltrace-bpf report TRACE --window '+cur.w[0]+','+cur.w[1]+' --perfetto '+d.stage+'-step-'+cur.i+'.pftrace':'');
    }
    // Inside a [data-tl-sync] container (the merged page: one timeline per
    // rank), a step chosen here is chosen on the others too; q: do not pass it on.
    // Training steps go across in the ranks' common numbering: a section
    // under [data-tl-offset=K] has common step = own + K; one under
    // [data-tl-apart] (no offset measured) neither sends nor takes them.
    function off(o){
      var w=o.closest('[data-tl-offset]');
      return w?+w.getAttribute('data-tl-offset'):0;
    }
    function apart(o){
      return d.stage=='train'&&!!o.closest('[data-tl-apart]');
    }
    function choose(i,q){
      cur=by[i]||null;
      z0=0;
      z1=1;
      inp.value=i;
      draw();
      var g=q||apart(sec)?null:sec.closest('[data-tl-sync]'),t=d.stage=='train';
      if(g)g.querySelectorAll('section.steptl[data-stage="'+d.stage+'"]').forEach(function(o){
        if(o!==sec&&o.chooseStep&&!(t&&o.closest('[data-tl-apart]')))o.chooseStep(t?i+off(sec)-off(o):i,1);
      });
    }
    function zoom(f,c){
      var s=(z1-z0)*f;
      s=Math.min(1,Math.max(1e-6,s));
      var m=z0+(z1-z0)*c;
      z0=Math.max(0,Math.min(1-s,m-s*c));
      z1=z0+s;
      draw();
    }
    function pan(f){
      var s=z1-z0;
      z0=Math.max(0,Math.min(1-s,z0+f*s));
      z1=z0+s;
      draw();
    }
    inp.addEventListener('change',function(){
      choose(+inp.value);
    });
    sec.querySelector('.tl-in').addEventListener('click',function(){
      zoom(0.5,0.5);
    });
    sec.querySelector('.tl-out').addEventListener('click',function(){
      zoom(2,0.5);
    });
    sec.querySelector('.tl-left').addEventListener('click',function(){
      pan(-0.25);
    });
    sec.querySelector('.tl-right').addEventListener('click',function(){
      pan(0.25);
    });
    sec.querySelector('.tl-reset').addEventListener('click',function(){
      z0=0;
      z1=1;
      draw();
    });
    box.addEventListener('wheel',function(ev){
      ev.preventDefault();
      var r=box.getBoundingClientRect();
      zoom(ev.deltaY<0?0.8:1.25,Math.min(1,Math.max(0,(ev.clientX-r.left)/W)));
    },{
      passive:false
    });
    var drag=null;
    box.addEventListener('mousedown',function(ev){
      drag=ev.clientX;
    });
    window.addEventListener('mouseup',function(){
      drag=null;
    });
    box.addEventListener('mousemove',function(ev){
      if(drag===null)return;
      var dx=ev.clientX-drag;
      drag=ev.clientX;
      pan(-dx/W);
    });
    // The process's step charts of the stage: a bar or point selects its step.
    var charts=document.getElementById(d.charts);
    if(charts)charts.querySelectorAll('svg.chart[data-stage="'+d.stage+'"] [data-i]').forEach(function(e){
      e.style.cursor='pointer';
      e.addEventListener('click',function(){
        choose(+e.getAttribute('data-i'));
        sec.scrollIntoView();
      });
    });
    sec.chooseStep=choose;
    choose(d.def,1);
  });
});
